"""prepare_compaction: the cut point, split turns, chained compactions and file tracking."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pi_sessions import PiSession
from stress import examples

from harness._compaction import CompactionSettings, prepare_compaction
from harness._compaction.tokens import context_size
from harness._tokens import estimate_tokens
from hooks import (
    AssistantContent,
    AssistantMessage,
    CompactionSummaryMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from repos import (
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    MemorySessionRepo,
    MessageEntry,
    ThinkingLevelChangeEntry,
    build_context,
    entry_message,
    open_session,
)

TS = "2025-01-01T00:00:00.000Z"


# --- builders -------------------------------------------------------------------------------


def text(tokens: int, tag: str = "x") -> str:
    """A string estimated at exactly ``tokens`` tokens (4 chars each)."""
    return (tag * (4 * tokens))[: 4 * tokens]


def user(tokens: int = 10, tag: str = "u") -> UserMessage:
    return UserMessage(content=text(tokens, tag))


def reply(tokens: int = 10, *calls: ToolCall) -> AssistantMessage:
    blocks: list[AssistantContent] = [TextContent(text=text(tokens, "a"))] if tokens else []
    return AssistantMessage(content=(*blocks, *calls), stop_reason="toolUse" if calls else "stop")


def call(call_id: str, name: str = "bash", **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments or {"command": "ls"})


def result(call_id: str, tokens: int = 10, name: str = "bash") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=text(tokens, "r"))


class PathBuilder:
    """Builds a root-first path of entries with ids e0, e1, ..."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._ids = itertools.count()

    def _base(self) -> dict[str, object]:
        parent = self.entries[-1].id if self.entries else None
        return {"id": f"e{next(self._ids)}", "parent_id": parent, "timestamp": TS}

    def msg(self, *messages: Message) -> PathBuilder:
        for m in messages:
            self.entries.append(MessageEntry(**self._base(), message=m))  # type: ignore[arg-type]
        return self

    def thinking(self) -> PathBuilder:
        self.entries.append(ThinkingLevelChangeEntry(**self._base(), thinking_level="low"))  # type: ignore[arg-type]
        return self

    def custom(self, tokens: int = 5) -> PathBuilder:
        self.entries.append(
            CustomMessageEntry(**self._base(), custom_type="note", content=text(tokens, "c"))  # type: ignore[arg-type]
        )
        return self

    def compaction(
        self, first_kept: str, *, details: object = None, from_hook: bool = False
    ) -> PathBuilder:
        self.entries.append(
            CompactionEntry(
                **self._base(),  # type: ignore[arg-type]
                summary="PREVIOUS SUMMARY",
                first_kept_entry_id=first_kept,
                tokens_before=1,
                details=details,
                from_hook=from_hook,
            )
        )
        return self

    def index(self, entry_id: str) -> int:
        return [e.id for e in self.entries].index(entry_id)


def raw_kept(path: Sequence[Entry], first_kept: str) -> list[Message]:
    """The context after appending a compaction at the end of ``path`` with ``first_kept``,
    selected like repos.build_context but NOT normalised (so a bad cut shows up)."""
    ids = [e.id for e in path]
    start = ids.index(first_kept)
    out: list[Message] = [CompactionSummaryMessage(summary="NEW", tokens_before=0)]
    for entry in path[start:]:
        m = None if isinstance(entry, CompactionEntry) else entry_message(entry)
        if m is not None:
            out.append(m)
    return out


def pair_problems(messages: Sequence[Message]) -> list[str]:
    """Tool results without an earlier call, in the order sent."""
    seen: set[str] = set()
    problems = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            seen.update(c.id for c in m.tool_calls)
        elif isinstance(m, ToolResultMessage) and m.tool_call_id not in seen:
            problems.append(f"orphan result {m.tool_call_id}")
    return problems


def kept_tokens(path: Sequence[Entry], first_kept: str) -> int:
    start = [e.id for e in path].index(first_kept)
    return sum(
        estimate_tokens((m,))
        for e in path[start:]
        if not isinstance(e, CompactionEntry) and (m := entry_message(e)) is not None
    )


# --- examples -------------------------------------------------------------------------------


def test_empty_path_and_trailing_compaction_give_none() -> None:
    assert prepare_compaction([], CompactionSettings()) is None
    b = PathBuilder().msg(user(), reply())
    b.compaction("e0")
    assert prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=1)) is None


def test_nothing_before_the_cut_gives_none() -> None:
    b = PathBuilder().msg(user(10), reply(10), user(10), reply(10))
    assert prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=1000)) is None


def test_keep_recent_tokens_picks_the_cut() -> None:
    # four turns of 100 + 100 tokens; keeping 300 tokens: the walk back reaches 300 at the
    # third turn's reply (e5), a valid cut point, so the kept part is e5..e7 (300 tokens).
    b = PathBuilder()
    for i in range(4):
        b.msg(user(100, f"{i}"), reply(100))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=300))
    assert prep is not None
    assert prep.first_kept_entry_id == "e5"
    assert kept_tokens(b.entries, prep.first_kept_entry_id) == 300
    assert prep.is_split_turn
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant"] * 2
    assert [m.role for m in prep.turn_prefix_messages] == ["user"]
    assert prep.turn_prefix_messages[0] == b.entries[4].message  # type: ignore[union-attr]

    # keeping 400: the walk reaches 400 exactly at the third turn's user message: whole turns.
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=400))
    assert prep is not None
    assert prep.first_kept_entry_id == "e4"
    assert not prep.is_split_turn
    assert prep.turn_prefix_messages == ()
    assert len(prep.messages_to_summarize) == 4


def test_never_cuts_at_a_tool_result() -> None:
    # u0 a1(call) r2(big) a3 ; the budget is reached inside the big result: the cut moves to
    # the next valid point (a3), never to r2.
    b = PathBuilder().msg(user(10), reply(5, call("c1")), result("c1", 500), reply(10))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=100))
    assert prep is not None
    assert prep.first_kept_entry_id == "e3"
    assert pair_problems(raw_kept(b.entries, prep.first_kept_entry_id)) == []


def test_huge_trailing_result_cuts_before_its_call_instead_of_keeping_everything() -> None:
    # pi keeps everything when only a tool result follows the budget point (#7020 shape).
    b = PathBuilder()
    b.msg(user(200), reply(200), user(50), reply(5, call("c1")), result("c1", 5000))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=1000))
    assert prep is not None
    assert prep.first_kept_entry_id == "e3"  # the call's message: call and result stay
    assert prep.is_split_turn
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant"]
    assert [m.role for m in prep.turn_prefix_messages] == ["user"]


def test_never_cuts_between_a_call_and_its_result() -> None:
    # A custom message chained between a call and its result is a valid cut point for pi;
    # cutting there would keep r4 without its call a2 (orphan tool result, #4570/#6832).
    b = PathBuilder().msg(user(10), reply(10))
    b.msg(reply(5, call("c1"))).custom(100).msg(result("c1", 5), reply(10))
    for keep in range(0, 200, 5):
        prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=keep))
        if prep is None:
            continue
        assert prep.first_kept_entry_id not in ("e3", "e4"), keep
        assert pair_problems(raw_kept(b.entries, prep.first_kept_entry_id)) == [], keep


def test_cut_slides_back_over_settings_entries_but_turn_stays_whole() -> None:
    b = PathBuilder().msg(user(100), reply(100)).thinking().thinking().msg(user(100), reply(100))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=200))
    assert prep is not None
    assert prep.first_kept_entry_id == "e2"  # the first thinking change before u4
    # the cut was chosen at a user message: not a split turn (pi would call it split)
    assert not prep.is_split_turn
    assert prep.turn_prefix_messages == ()
    assert len(prep.messages_to_summarize) == 2


def test_running_tool_calls_stay_in_the_kept_part() -> None:
    b = PathBuilder().msg(user(100), reply(100), user(100), reply(100, call("c1"), call("c2")))
    b.msg(result("c1", 100))  # c2 is still running
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=10))
    assert prep is not None
    index = b.index(prep.first_kept_entry_id)
    assert index <= 3  # the calling message is kept, so c2's late result has its call


def test_tokens_before_is_the_context_size_of_the_whole_branch() -> None:
    b = PathBuilder().msg(user(100), reply(100), user(100), reply(100))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=150))
    assert prep is not None
    assert prep.tokens_before == context_size(build_context(b.entries).messages).tokens == 400


def test_file_lists_come_from_summarised_and_prefix_tool_calls() -> None:
    b = PathBuilder().msg(
        user(10),
        reply(5, call("c1", "read", path="a.py"), call("c2", "read", path="b.py")),
        result("c1", name="read"),
        result("c2", name="read"),
        reply(5, call("c3", "edit", path="b.py", oldText="x", newText="y")),
        result("c3", name="edit"),
        user(10),
        reply(5, call("c4", "write", path="c.py", content="z")),
        result("c4", name="write"),
        reply(300),
        user(400),
        reply(400),
    )
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=900))
    assert prep is not None
    assert prep.is_split_turn  # cut at the long reply after the write
    assert prep.first_kept_entry_id == "e9"
    assert [m.role for m in prep.turn_prefix_messages] == ["user", "assistant", "toolResult"]
    assert prep.read_files == ("a.py",)  # b.py was read, then edited: modified only
    assert prep.modified_files == ("b.py", "c.py")  # c.py comes from the turn prefix


# --- chained compactions ----------------------------------------------------------------------


def test_iterative_update_uses_previous_summary_and_boundary() -> None:
    b = PathBuilder()
    for i in range(3):
        b.msg(user(100, f"{i}"), reply(100))
    b.compaction("e4", details={"readFiles": ["old.py"], "modifiedFiles": ["mod.py"]})
    for i in range(3):
        b.msg(user(100, f"n{i}"), reply(100))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=200))
    assert prep is not None
    assert prep.previous_summary == "PREVIOUS SUMMARY"
    # the range starts at the previous first kept entry e4: e0..e3 are not summarised again
    first = prep.messages_to_summarize[0]
    assert first == b.entries[4].message  # type: ignore[union-attr]
    assert not any(isinstance(m, CompactionSummaryMessage) for m in prep.messages_to_summarize)
    assert prep.read_files == ("old.py",)
    assert prep.modified_files == ("mod.py",)


def test_file_lists_are_not_seeded_from_a_hook_compaction() -> None:
    b = PathBuilder().msg(user(100), reply(100))
    b.compaction("e0", details={"readFiles": ["hook.py"], "modifiedFiles": ["x"]}, from_hook=True)
    b.msg(user(100), reply(100, call("c1", "read", path="new.py")), result("c1", 5, "read"))
    b.msg(user(100), reply(100))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=150))
    assert prep is not None
    assert prep.read_files == ("new.py",)
    assert prep.modified_files == ()


def test_first_kept_not_on_path_starts_just_after_the_previous_compaction() -> None:
    b = PathBuilder().msg(user(100), reply(100, call("c1")))
    b.compaction("gone")  # appended while c1 was running: its result follows the compaction
    b.msg(result("c1", 100), reply(100), user(100), reply(100))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=150))
    assert prep is not None
    assert prep.first_kept_entry_id != "e3"  # never the orphan result
    assert pair_problems(raw_kept(b.entries, prep.first_kept_entry_id)) == []
    # nothing before the previous compaction is summarised again
    assert all(m != b.entries[0].message for m in prep.messages_to_summarize)  # type: ignore[union-attr]


async def test_chained_compactions_leave_no_orphan_tool_result() -> None:
    """#4570: the kept window of the latest compaction holds an older compaction whose next
    entry is a tool result. Every cut must keep calls and results together."""
    for keep in range(0, 1400, 25):
        session = await MemorySessionRepo().create("/tmp")
        session.append_message(user(100, "a"))
        session.append_message(reply(50))
        first_kept = session.append_message(user(100, "b")).id
        session.append_message(reply(20, call("c1"), call("c2")))
        # a compaction appended while c1 and c2 were running (pi #6832 / pinet #941)
        session.append_compaction("S1", first_kept, 500)
        session.append_message(result("c1", 200))
        session.append_message(result("c2", 200))
        session.append_message(reply(100))
        session.append_message(user(100, "c"))
        session.append_message(reply(20, call("c3", "read", path="f.py")))
        session.append_custom_message("note", "injected between call and result")
        session.append_message(result("c3", 200, "read"))
        session.append_message(reply(100))

        path = session.get_branch()
        prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=keep))
        if prep is None:
            continue
        assert prep.previous_summary == "S1"
        kept_entry = session.get_entry(prep.first_kept_entry_id)
        assert not (
            isinstance(kept_entry, MessageEntry)
            and isinstance(kept_entry.message, ToolResultMessage)
        )
        session.append_compaction("S2", prep.first_kept_entry_id, prep.tokens_before)
        new_path = session.get_branch()
        raw = raw_kept(new_path[:-1], prep.first_kept_entry_id)
        assert pair_problems(raw) == [], keep
        context = build_context(new_path).messages
        # normalisation had nothing to drop or synthesise (it may only reorder: a result is
        # hoisted over the custom message chained after its call)
        assert len(context) == len(raw), keep
        assert all(m in context for m in raw[1:]), keep
        calls = {c.id for m in context if isinstance(m, AssistantMessage) for c in m.tool_calls}
        results = {m.tool_call_id for m in context if isinstance(m, ToolResultMessage)}
        assert calls == results, keep


# --- property test ----------------------------------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> list[Entry]:
    b = PathBuilder()
    ids = itertools.count()
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            b.thinking()
        b.msg(user(draw(st.integers(0, 60))))
        for _ in range(draw(st.integers(0, 3))):
            calls = [call(f"c{next(ids)}") for _ in range(draw(st.integers(0, 3)))]
            b.msg(reply(draw(st.integers(0, 40)), *calls))
            for c in calls:
                if draw(st.integers(0, 5)) == 0:
                    b.custom(draw(st.integers(1, 30)))  # chained between call and result
                if draw(st.integers(0, 5)) == 0:
                    b.thinking()
                if draw(st.integers(0, 7)) > 0:  # sometimes no result (interrupted)
                    b.msg(result(c.id, draw(st.integers(0, 120))))
        if draw(st.booleans()):
            b.msg(reply(draw(st.integers(1, 40))))
        if draw(st.integers(0, 4)) == 0 and len(b.entries) > 2:
            # a previous compaction, possibly mid tool call, possibly with a stale first kept id
            target = draw(st.sampled_from([*(e.id for e in b.entries), "missing"]))
            b.compaction(target, from_hook=draw(st.booleans()))
    if isinstance(b.entries[-1], CompactionEntry):
        b.msg(user(5))
    return b.entries


def _valid_by_brute_force(path: Sequence[Entry], i: int) -> bool:
    """A cut at i is valid when the entry is a context message other than a tool result, and
    keeping path[i:] keeps no tool result without its call."""
    entry = path[i]
    if isinstance(entry, CompactionEntry):
        return False
    m = entry_message(entry)
    if m is None or isinstance(m, ToolResultMessage):
        return False
    kept = [x for e in path[i:] if not isinstance(e, CompactionEntry) and (x := entry_message(e))]
    return not pair_problems(kept)


@settings(
    max_examples=examples(100, 300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(path=conversations(), keep=st.integers(0, 600))
def test_property_cut_is_valid_and_respects_the_budget(path: list[Entry], keep: int) -> None:
    prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=keep))
    ids = [e.id for e in path]
    compactions = [i for i, e in enumerate(path) if isinstance(e, CompactionEntry)]
    boundary = 0
    if compactions:
        last = path[compactions[-1]]
        assert isinstance(last, CompactionEntry)
        head = ids[: compactions[-1]]
        boundary = (
            head.index(last.first_kept_entry_id)
            if last.first_kept_entry_id in head
            else compactions[-1] + 1
        )
    tokens = [
        0
        if isinstance(e, CompactionEntry) or (m := entry_message(e)) is None
        else estimate_tokens((m,))
        for e in path
    ]
    valid = [i for i in range(boundary, len(path)) if _valid_by_brute_force(path, i)]
    suffix = [sum(tokens[i:]) for i in range(len(path) + 1)]
    # the budget point: the newest message whose suffix reaches keep_recent_tokens
    crossing = max(
        (i for i in range(boundary, len(path)) if tokens[i] and suffix[i] >= keep), default=None
    )
    if not valid:
        assert prep is None
        return
    if crossing is None:
        expected = valid[0]
    else:
        after = [c for c in valid if c >= crossing]
        expected = after[0] if after else valid[-1]
    expected_cut = expected
    while (
        expected_cut > boundary
        and not isinstance(path[expected_cut - 1], CompactionEntry)
        and entry_message(path[expected_cut - 1]) is None
    ):
        expected_cut -= 1
    before_cut = sum(
        1
        for i in range(boundary, expected_cut)
        if not isinstance(path[i], CompactionEntry) and entry_message(path[i]) is not None
    )
    if prep is None:
        assert before_cut == 0  # nothing to summarise
        return
    cut = ids.index(prep.first_kept_entry_id)
    assert cut == expected_cut
    kept = raw_kept(path, prep.first_kept_entry_id)
    assert pair_problems(kept) == []
    assert not isinstance(entry_message(path[expected]), ToolResultMessage)
    # never keeps more than needed: any later valid cut would keep less than the budget
    # (with a zero budget, trailing empty messages "keep" zero tokens too)
    if keep > 0:
        assert all(suffix[c] < keep for c in valid if c > expected)
    # what is summarised plus the prefix plus what is kept covers the range exactly once
    summarised = len(prep.messages_to_summarize) + len(prep.turn_prefix_messages)
    assert summarised == before_cut > 0


def test_property_finds_a_cut_whenever_one_would_summarise_something() -> None:
    # a long conversation always compacts with a small budget
    b = PathBuilder()
    for i in range(10):
        b.msg(user(50, f"{i}"), reply(10, call(f"c{i}")), result(f"c{i}", 100), reply(20))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=100))
    assert prep is not None
    assert len(prep.messages_to_summarize) >= 30


# --- generated pi sessions (the real files: tests/corpus) -------------------------------------


@pytest.mark.parametrize("kind", ["large-session", "before-compaction", "v3"])
def test_generated_pi_session(pi_file: Callable[..., PiSession], kind: str) -> None:
    record = pi_file(kind)
    assert record.path is not None
    # The budget: a quarter of what the branch holds (at most pi's default of 20000).
    keep = 20000 if kind != "v3" else 4000
    with open_session(record.path) as session:
        path = session.get_branch()
        prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=keep))
        assert prep is not None
        ids = [e.id for e in path]
        assert prep.first_kept_entry_id in ids
        kept_entry = path[ids.index(prep.first_kept_entry_id)]
        assert not (
            isinstance(kept_entry, MessageEntry)
            and isinstance(kept_entry.message, ToolResultMessage)
        )
        assert prep.tokens_before > 0
        assert prep.leaf_id == path[-1].id
        assert pair_problems(raw_kept(path, prep.first_kept_entry_id)) == []
        # about keep_recent_tokens are kept (the cut lands on a message boundary)
        assert 0.75 * keep <= kept_tokens(path, prep.first_kept_entry_id) <= 2 * keep
        assert prep.messages_to_summarize or prep.turn_prefix_messages
        # The generator's sessions read, edit and write files.
        assert prep.modified_files
        assert not set(prep.read_files) & set(prep.modified_files)
        assert list(prep.read_files) == sorted(prep.read_files)
        # A previous summary exactly when a compaction is on the active branch (v1 is linear; v3's
        # compaction is on the branch its final leaf entry moved away from).
        on_path = [
            i
            for i in record.compaction_lines
            if record.version == 1 or record.lines[i]["id"] in record.active_path
        ]
        assert bool(prep.previous_summary) == bool(on_path)
    assert kind != "v3" or not on_path


def test_custom_message_user_roles_are_turn_starts() -> None:
    # a custom message starts a turn, so cutting at it is not a split turn
    b = PathBuilder().msg(user(100), reply(100)).custom(100).msg(reply(100))
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=200))
    assert prep is not None
    assert prep.first_kept_entry_id == "e2"
    assert not prep.is_split_turn
