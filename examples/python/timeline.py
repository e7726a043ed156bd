"""Pipeline timelines: a searched V-shape schedule and a plan's simulated step, as pictures."""
import heddle

schedule = heddle.schedule("vshape", devices=4, micro_batches=8, memory=4)
print(schedule)  # the ASCII timeline, as `heddle schedule` prints it
schedule.plot().savefig("schedule.png")

plan = heddle.simulate(heddle.load("gpt3-1.3b"), "a100x16", "dp=2,tp=2,pp=4,schedule=interleaved:2",
                       train=True, batch=64)
plan.plot().savefig("plan.png")
print("wrote schedule.png and plan.png")
