"""A torch module on 4 thread-devices, checked against the single-device interpreter, plotted."""
import torch, heddle

net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
x = torch.randn(32, 64)
model = heddle.from_torch(net, (x,))
result = heddle.run(model, mesh=4, strategy="dp=2,tp=2", inputs=[x], check=True)
print("ok:", result.ok, "max |error| vs torch:", abs(result.outputs[0] - net(x).detach().numpy()).max())
heddle.simulate(model, "a100x4", "dp=2,tp=2").plot().savefig("torch_run.png")
