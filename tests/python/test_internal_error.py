"""A broken invariant (a failed HEDDLE_ASSERT) raises heddle.InternalError instead of aborting the
interpreter, on the calling thread and on the runtime's device threads. `_heddle._debug_assert` is
a test hook, not API: it fails an assert on purpose."""
import pytest

import heddle
from heddle import _heddle


def test_assert_on_the_calling_thread_raises_internal_error():
    with pytest.raises(heddle.InternalError) as e:
        _heddle._debug_assert()
    msg = str(e.value)
    assert "Module.cpp:" in msg
    assert "devices > 0 failed: _debug_assert on the calling thread" in msg
    assert not isinstance(e.value, heddle.Error)


@pytest.mark.parametrize("devices", [1, 4])
def test_assert_on_device_threads_reaches_the_caller(devices):
    with pytest.raises(heddle.InternalError) as e:
        _heddle._debug_assert(devices)
    msg = str(e.value)
    assert "Tensor.cpp:" in msg
    assert "src.is_int() == is_int() && src.rank() == rank() failed: copy i64[8, 8]" in msg


def test_the_interpreter_survives_and_keeps_working(tiny):
    for _ in range(3):
        with pytest.raises(heddle.InternalError):
            _heddle._debug_assert(2)
    r = heddle.run(tiny, mesh=2, strategy="dp=2", check=True)
    assert r.ok
