"""heddle.from_torch: modules imported through torch.onnx run with outputs equal to torch's, on
one and on four thread-devices. Skipped when PyTorch is absent (make test never needs it)."""
import numpy as np
import pytest

import heddle

torch = pytest.importorskip("torch")


def modules():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    norm = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    conv = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10)
    )
    return [("mlp", mlp, (8, 16)), ("norm", norm, (8, 16)), ("conv", conv, (4, 3, 8, 8))]


@pytest.mark.parametrize("name,module,shape", modules(), ids=lambda v: v if isinstance(v, str) else "")
def test_outputs_equal_torch(name, module, shape):
    x = torch.randn(*shape)
    with torch.no_grad():
        want = module(x).numpy()
    m = heddle.from_torch(module, (x,))
    one = heddle.run(m, inputs=[x])
    np.testing.assert_allclose(one.outputs[0], want, rtol=1e-4, atol=1e-5)
    four = heddle.run(m, mesh=4, strategy="dp=4", inputs={m.inputs[0][0]: x}, check=True)
    assert four.ok
    np.testing.assert_allclose(four.outputs[0], want, rtol=1e-4, atol=1e-5)


def test_unsupported_export_is_an_error():
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs()

    with pytest.raises(heddle.Error):
        heddle.from_torch(Odd(), (torch.randn(4, 8),))
