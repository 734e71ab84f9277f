"""castpile.gpu.launch_cache: which prepared launch a call issues, with fakes standing in for CUDA tensors."""

import torch

from castpile.gpu.launch_cache import GRAPHS_KEPT, LaunchCache


class _FakeCudaTensor:
    is_cuda = True

    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


def _recording_binder(log):
    def bind_for(tensors, **options):
        addresses = tuple(t.address for t in tensors.values())

        def launch(**late):
            log.append(("run", addresses, sorted(options), tuple(late)))

        log.append(("bind", addresses, sorted(options)))
        return launch

    return bind_for


def test_owned_outputs_replay_a_graph_per_address_and_keep_the_newest(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    cache, device_tensor = LaunchCache(), _FakeCudaTensor(0)
    log = []
    outs = [_FakeCudaTensor(16 * (i + 1)) for i in range(GRAPHS_KEPT + 1)]
    for out in [outs[0], outs[0], *outs[1:]]:
        cache.issue("k", _recording_binder(log), {"out": out}, True, device_tensor)
    binds = [e for e in log if e[0] == "bind"]
    assert [e[1] for e in binds] == [(o.address,) for o in outs] and all(e[2] == ["graph"] for e in binds)
    assert sorted(cache.graphs["k"]) == [(o.address,) for o in outs[1:]]  # the oldest was dropped
    assert len([e for e in log if e[0] == "run"]) == GRAPHS_KEPT + 2


def test_a_graph_is_kept_per_set_of_addresses(monkeypatch):
    """A fused op's residual changes: the same output with another residual is another graph."""
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    cache, device_tensor = LaunchCache(), _FakeCudaTensor(0)
    log = []
    out, first, second = _FakeCudaTensor(16), _FakeCudaTensor(32), _FakeCudaTensor(48)
    for residual in (first, second, first):
        cache.issue("k", _recording_binder(log), {"residual": residual, "out": out}, True, device_tensor)
    assert [e[1] for e in log if e[0] == "bind"] == [(32, 16), (48, 16)]
    assert [e[1] for e in log if e[0] == "run"] == [(32, 16), (48, 16), (32, 16)]


def test_outputs_the_wrapper_allocated_and_calls_under_capture_launch_with_the_output_late(monkeypatch):
    cache, device_tensor = LaunchCache(), _FakeCudaTensor(0)
    log = []
    cache.issue("k", _recording_binder(log), {"out": _FakeCudaTensor(32)}, False, device_tensor)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    cache.issue("k", _recording_binder(log), {"out": _FakeCudaTensor(48)}, True, device_tensor)
    assert log == [("bind", (32,), ["late"]), ("run", (32,), ["late"], ("out",)), ("run", (32,), ["late"], ("out",))]
