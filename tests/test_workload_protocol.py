"""Job types, the JSON-lines messages, the stdio channel and leases (none needs torch)."""

from __future__ import annotations

import io
import json
import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shock.job.channel import MemoryChannel, StdioChannel
from shock.job.lease import Lease
from shock.job.messages import (
    BatchSizeApproval,
    BatchSizeRequest,
    Exit,
    LeaseGrant,
    Preempt,
    Progress,
    ProtocolError,
    Started,
    parse_command,
)
from shock.traces.templates import gavel_templates
from shock.workloads.families import FAMILIES, UnknownJobTypeError, all_job_types, parse_job_type
from shock.workloads.progress import TrainingProgress


def test_every_gavel_job_type_parses_to_a_family_with_a_workload():
    for template in gavel_templates():
        family, batch_size = parse_job_type(template.job_type)
        assert family == template.model_family
        assert batch_size == (template.batch_size or FAMILIES[family].default_batch_size)
    assert set(all_job_types()) == {t.job_type for t in gavel_templates()}


def test_families_take_their_limits_from_the_adaptation_tables():
    assert FAMILIES["ResNet-18"].accordion_max_batch_size == 256
    assert FAMILIES["LM"].gns_batch_size_limit == 80
    assert FAMILIES["Transformer"].accordion_max_batch_size is None  # non-adaptive
    assert FAMILIES["Transformer"].gns_batch_size_limit == 128
    assert FAMILIES["A3C"].default_batch_size == 4
    assert FAMILIES["CycleGAN"].default_batch_size == 1


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("VGG-16 (batch size 32)", "no workload for model family 'VGG-16'"),
        ("ResNet-18 (batch size thirty)", "is not '<family> \\(batch size <N>\\)'"),
        ("", "is not"),
        ("ResNet-18 (batch size 0)", "batch size must be >= 1"),
    ],
)
def test_bad_job_types_get_clear_errors(text, match):
    with pytest.raises(UnknownJobTypeError, match=match):
        parse_job_type(text)


def test_messages_serialise_with_their_type():
    assert Started(7, 0, 32, 0).to_dict() == {
        "type": "started",
        "job_id": 7,
        "step": 0,
        "batch_size": 32,
        "resumed_from_step": 0,
    }
    assert Exit("done", 500, 500).to_dict() == {
        "type": "exit",
        "reason": "done",
        "step": 500,
        "target_steps": 500,
    }


def test_commands_parse_and_malformed_ones_name_the_field():
    assert parse_command({"type": "preempt"}) == Preempt()
    assert parse_command({"type": "lease", "steps": 5}) == LeaseGrant(5, None)
    assert parse_command({"type": "lease", "steps": None, "seconds": 2}) == LeaseGrant(None, 2.0)
    assert parse_command({"type": "batch_size", "batch_size": 64}) == BatchSizeApproval(64)
    for raw, match in [
        ([], "expected a JSON object"),
        ({"type": "reboot"}, "unknown message type"),
        ({"type": "lease", "steps": -1}, "field 'steps'"),
        ({"type": "lease", "seconds": "soon"}, "field 'seconds'"),
        ({"type": "batch_size"}, "field 'batch_size'"),
        ({"type": "batch_size", "batch_size": True}, "field 'batch_size'"),
    ]:
        with pytest.raises(ProtocolError, match=match):
            parse_command(raw)


def test_stdio_channel_writes_json_lines_and_skips_bad_input():
    out, errors = io.StringIO(), io.StringIO()
    stdin = io.StringIO('{"type":"preempt"}\nnot json\n\n{"type":"lease","steps":3}\n')
    channel = StdioChannel(out, stdin, errors)
    channel.send(BatchSizeRequest(3, 64, "gns"))
    deadline = time.monotonic() + 5
    commands: list = []
    while len(commands) < 2 and time.monotonic() < deadline:
        commands += channel.receive()
        time.sleep(0.01)
    assert commands == [Preempt(), LeaseGrant(3, None)]
    assert json.loads(out.getvalue()) == {
        "type": "batch_size_request",
        "step": 3,
        "batch_size": 64,
        "reason": "gns",
    }
    assert "stdin line 2: ignored" in errors.getvalue()


def test_stdio_channel_notices_a_closed_stdout():
    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    channel = StdioChannel(ClosedPipe(), io.StringIO())
    assert channel.connected()
    channel.send(Started(1, 0, 8, 0))  # does not raise
    assert not channel.connected()


def test_progress_with_a_diverged_loss_is_still_strict_json():
    out = io.StringIO()
    channel = StdioChannel(out, io.StringIO())
    channel.send(Progress(3, 10.0, 8, None, 10, 24))
    assert json.loads(out.getvalue())["loss"] is None
    with pytest.raises(ValueError):
        channel.send(Progress(3, 10.0, 8, math.nan, 10, 24))


def test_memory_channel_reacts_to_messages():
    channel = MemoryChannel(react=lambda m: [Preempt()] if isinstance(m, Started) else [])
    channel.send(Started(1, 0, 8, 0))
    assert channel.receive() == [Preempt()]
    assert channel.receive() == []


def test_lease_by_steps_extends_from_its_end_and_asks_for_renewal_once():
    lease = Lease()
    assert not lease.expired(10**9, 10**9)  # no lease: unlimited
    lease.grant(20, None, step=0, now=0.0)
    assert not lease.wants_renewal(17, 0.0)
    assert lease.wants_renewal(18, 0.0)  # 2 of 20 steps left = 10%
    lease.renewal_requested = True
    assert not lease.wants_renewal(19, 0.0)
    assert lease.expired(20, 0.0)
    lease.grant(30, None, step=19, now=0.0)
    assert lease.end_step == 50 and not lease.expired(49, 0.0) and lease.expired(50, 0.0)


def test_lease_by_seconds_counts_from_now_and_null_is_unlimited():
    lease = Lease()
    lease.grant(None, 10.0, step=5, now=100.0)
    assert lease.end_step is None
    assert not lease.wants_renewal(6, 108.9)
    assert lease.wants_renewal(6, 109.0)
    assert not lease.expired(10**6, 109.9) and lease.expired(6, 110.0)
    lease.grant(None, None, step=6, now=200.0)
    assert not lease.expired(10**6, 10**6)


@given(
    target=st.integers(1, 500),
    initial=st.integers(1, 256),
    switches=st.lists(st.tuples(st.integers(0, 600), st.integers(1, 512)), max_size=4),
)
def test_batch_size_changes_preserve_samples_and_end_exactly_at_the_target(
    target, initial, switches
):
    progress = TrainingProgress.start(target, initial)
    pending = sorted(switches)
    while not progress.done:
        while pending and pending[0][0] <= progress.step:
            before = progress.step
            progress.switch(pending.pop(0)[1])
            assert progress.step == before
            # The target always covers exactly the remaining samples at the new batch size.
            left = progress.total_samples - progress.samples
            assert (progress.target_steps - progress.step - 1) * progress.batch_size < left
            assert left <= (progress.target_steps - progress.step) * progress.batch_size
        size = progress.next_batch_size()
        assert 1 <= size <= progress.batch_size
        progress.advance(size)
    assert progress.samples == target * initial
    assert progress.step == progress.target_steps
    if not switches:
        assert progress.step == target


def test_switch_refuses_a_batch_size_below_one():
    with pytest.raises(ValueError, match="batch size must be >= 1"):
        TrainingProgress.start(10, 4).switch(0)
