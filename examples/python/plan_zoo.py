"""Plan GPT-3 175B training on 1,024 A100s and hand the plan to Megatron-LM."""
import heddle

model = heddle.load("gpt3-175b")
print(model.summary())
plan = heddle.plan(model, heddle.Cluster("a100x1024"), train=True, batch=1536, time_limit=30,
                   target="megatron")
print(plan.strategy, "{:.3g} s per step, MFU {:.1%}".format(plan.step_time_s, plan.mfu))
print("runs on:", ", ".join(plan.runnable_by))
for alt in plan.ranking[:3]:
    print("  alternative", alt["strategy"], "{:.3g} s".format(alt["step_time_s"]))
print(plan.export("megatron"))
