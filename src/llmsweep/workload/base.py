"""The contract between workloads and whoever runs them.

A workload describes *what* to send and in which order, never *how*: it yields small actions from plain generators
("lane programs"), and an interpreter carries them out. The load generator interprets them in wall-clock time over
HTTP; the simulator's predictor interprets the very same programs in virtual time with no HTTP. Keeping the order
logic (think times, subagent spawn/join, lane recycling) here means both see identical traffic.

A lane program is a generator that yields actions and receives their results:

    def program():
        outcome = yield Send(spec)        # -> RequestOutcome
        yield Sleep(2.5)                   # -> None (think time, end-to-start)
        child = yield Spawn(other())       # -> SpawnHandle; runs concurrently
        yield Join([child])                # -> None once the child's whole tree has finished
        yield Drain()                      # -> None once every lane's warm-up has drained (see `Drain`)

Concurrency semantics (AgentX): an interpreter runs `concurrency` lanes; a lane runs one session tree at a time and
takes the next session only after the whole tree (root and every spawned descendant) has drained. So in-flight
requests may exceed the concurrency during fan-out; live session trees never do. A program may end with spawned
children it never joins (background subagents): they still belong to its tree.

Prompts may be deferred (`Deferred`): `RequestSpec.messages`/`.prompt` build on first read, so an interpreter that
needs only `input_tokens` (the simulator) never pays for the text. Build specs are not picklable; build the workload
in the process that interprets it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar, cast, overload

Phase = Literal["warmup", "profiling"]
"""A request's phase: sent in the warm-up, or measured."""
RunPhase = Literal["warming", "measuring", "draining"]
"""Where a run of a workload stands, the one vocabulary for it (the client's progress, bench's bar, run's display):
no profiling request sent yet; measuring; the window over or a stop called, waiting for what is in flight."""
Api = Literal["chat", "completions"]


@dataclass(frozen=True, slots=True)
class RequestIdentity:
    """Who a request is, for records and metrics; never sent to the server."""

    trace: str = ""
    lane: int = 0
    turn: int = 0
    phase: Phase = "profiling"
    session: str = ""
    """Id of the session tree (one root play of one trace)."""
    node: str = ""
    """Id of the agent within the tree ('' for the root, else the subagent's id)."""
    request_index: int = 0
    """Position of the request in the workload (fixed-length: prompt index)."""
    primer: bool = False
    """The root stream's warm-start primer (AgentX): its failure ends the whole run (`gates.root_primer_failed`),
    as AIPerf aborts a run whose root primer fails; a subagent's primer is not one."""

T = TypeVar("T")


class Deferred:
    """A prompt (chat history or completions prompt) built only when someone reads it.

    Agentic prompts reach hundreds of thousands of tokens; the virtual-time simulator only needs their lengths
    (`RequestSpec.input_tokens`), so workloads hand `RequestSpec` a builder instead of megabytes of text. Reading
    `spec.messages` / `spec.prompt` builds it once and caches it; nothing changes for readers.
    """

    __slots__ = ("build",)

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build = build


DeferredMessages = Deferred  # the name the agentic workload uses for chat histories


class _Lazy(Generic[T]):
    """Data descriptor behind `RequestSpec.messages` and `.prompt`: stores a value or a `Deferred`, returns a value
    (the constructor accepts either; readers always get the built value)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._key = "_stored_" + name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> None: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> T | None:
        if obj is None:
            return None  # the dataclass default
        value = obj.__dict__[self._key]
        if isinstance(value, Deferred):
            value = value.build()
            obj.__dict__[self._key] = value
        return cast("T", value)

    def __set__(self, obj: object, value: T | Deferred) -> None:
        obj.__dict__[self._key] = value


@dataclass(frozen=True, slots=True)
class BlockRun:
    """Consecutive deterministic blocks of one namespace: block `ids[i]` contributes the first `size` tokens of
    source (namespace, ids[i]) — the last block only `last` — as `BlockText.text(namespace, id, n)` draws them."""

    namespace: str
    ids: Sequence[int]
    size: int
    last: int


TokenRun = str | BlockRun
"""A piece of message content: a str is one word (one token), a `BlockRun` is block text."""


class MessageShape(Protocol):
    """A chat message's tokens without its text, for an interpreter that needs only token counts and prefix
    equality (the simulator in virtual time). Its content is the concatenation of `runs()`; two contents are equal
    exactly when their runs' tokens are (a source's tokens are a pure function of its key, as block text is of its
    id, and a shorter run of a source is a prefix of a longer one). `key` names the conversation *through* this
    message, for memoisation: equal keys mean equal roles and runs of this message and of every message before it.
    The chat template around the content is the interpreter's to add."""

    @property
    def key(self) -> Hashable: ...

    @property
    def role(self) -> str: ...

    def runs(self) -> Sequence[TokenRun]: ...


@dataclass(frozen=True, slots=True)
class ShapedMessage:
    """A :class:`MessageShape` whose runs are known when it is made."""

    key: Hashable
    role: str
    content: tuple[TokenRun, ...]

    def runs(self) -> tuple[TokenRun, ...]:
        return self.content


@dataclass(frozen=True)
class RequestSpec:
    """One request to send. Exactly one of `messages` (chat) or `prompt` (completions) is set.

    `messages` and `prompt` may be given as a `Deferred`; reading the attribute always returns the built value.
    Use `prompt_built` to ask without building (the simulator never needs the text, only `input_tokens`).
    """

    api: Api
    max_tokens: int
    messages: _Lazy[tuple[dict[str, Any], ...] | None] = _Lazy()
    prompt: _Lazy[str | tuple[int, ...] | None] = _Lazy()
    ignore_eos: bool = True
    input_tokens: int | None = None
    """Input length the workload intended (theoretical ISL), for accounting and cross-checks."""
    theoretical_cached_tokens: int | None = None
    """Prefix tokens an ideal, infinite cache would already hold for this request (agentic traces)."""
    identity: RequestIdentity = field(default_factory=RequestIdentity)
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Engine-specific request fields (e.g. chat_template_kwargs); merged into the JSON body as is."""
    shape: tuple[MessageShape, ...] | None = None
    """The prompt as token runs (see :class:`MessageShape`), when the workload can say so without text: for chat, the
    same tokens as `messages` (the interpreter adds the chat template); for completions, one message whose runs are
    the tokens of `prompt` as they are. `messages` / `prompt` stay what is sent over HTTP. None: read those."""

    @property
    def prompt_built(self) -> bool:
        """False while `messages` or `prompt` is still a `Deferred` nobody has read."""
        stored = self.__dict__
        return not isinstance(stored.get("_stored_messages"), Deferred) and not isinstance(
            stored.get("_stored_prompt"), Deferred
        )


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """What a program learns from a finished request (the full raw record goes to records.jsonl separately)."""

    ok: bool
    output_text: str = ""
    output_tokens: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Send:
    spec: RequestSpec


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class Spawn:
    program: LaneProgram


@dataclass(frozen=True, slots=True)
class SpawnHandle:
    id: int


@dataclass(frozen=True, slots=True)
class Join:
    handles: tuple[SpawnHandle, ...]


@dataclass(frozen=True, slots=True)
class Drain:
    """Wait until the warm-up has drained everywhere, then go on (AgentX drains every lane's warm-up and starts
    profiling from that snapshot, so no warm-up work falls inside the profiling window).

    Only a workload whose `warmup_drain_s` is set yields it. The programs that must arrive (:class:`WarmupDrain`):
    each closed-loop lane's first program, and every program one of those spawns before it arrives. They are held
    until all of them have arrived or ended, in every client worker, and are then released together; a lane takes its
    second session only after the release. Any other program's `Drain` returns at once, as does every `Drain` in open
    loop. An interpreter that waits longer than `warmup_drain_s` for the release stops the run with that reason."""


Action = Send | Sleep | Spawn | Join | Drain
LaneProgram = Generator[Action, Any, None]


class WarmupDrain:
    """The interpreters' shared count of the programs that still have to reach `Drain`: one per closed-loop lane at
    the start, one more per program such a program spawns before it arrives. `leave` (a program arrived, or ended
    without arriving) returns True on the call that empties it: the release."""

    __slots__ = ("pending",)

    def __init__(self, lanes: int) -> None:
        self.pending = lanes

    @property
    def holding(self) -> bool:
        """Still waiting for someone (before the release)."""
        return self.pending > 0

    def join(self) -> None:
        """An armed program spawned one more that must arrive."""
        self.pending += 1

    def leave(self) -> bool:
        self.pending -= 1
        return self.pending == 0


@dataclass(frozen=True, slots=True)
class Arrival:
    """An open-loop session: start `program` at `at` seconds after the run starts, whatever is in flight."""

    at: float
    program: LaneProgram


class Workload(ABC):
    """A source of lane programs (closed loop) or timed arrivals (open loop).

    Workloads are built from a picklable config inside each client worker process, so they must be deterministic
    for a given seed and lane assignment.
    """

    name: str = "workload"
    tree_idle_cap_s: float | None = None
    """AgentX's per-trajectory-tree idle cap: an interpreter brings a session tree's pending sleeps forward together
    (order and relative delays kept) once none of the tree's programs has had a request in flight for this long, so
    no tree idles longer; a tree with a request in flight waits its sleeps out. None: no cap."""
    warmup_drain_s: float | None = None
    """None: lanes go from warm-up to profiling on their own. Else the lanes' first programs yield `Drain` once their
    warm-up is done, and an interpreter waits at most this many seconds for every lane's (AgentX's warm-up grace)."""

    @abstractmethod
    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        """Session programs lane `lane` runs one after another (closed loop). May share state across lanes."""

    def arrivals(self) -> Iterator[Arrival] | None:
        """Timed sessions for open-loop replay (rate or timestamped traces); None for closed-loop workloads."""
        return None

    def bind_worker(self, worker: int, workers: int) -> None:
        """Make this copy produce only worker `worker`'s share of `workers` client processes' traffic.

        Called once, before the first session, in every worker process (also with `(0, 1)` for one process). The
        default does nothing: lanes and open-loop arrivals are already split by the client, which suffices unless a
        workload shares one sequence across all its lanes (fixed-length prompts), where each process would
        otherwise replay all of it.
        """
        return None

    def prepare(self) -> None:
        """Build, before the clock starts, what the lanes will send, so the hot loop only sends bytes and stamps
        times. Called once per client worker, after `bind_worker`. The default builds nothing (prompts stay lazy)."""
        return None

    def describe(self) -> dict[str, Any]:
        """JSON-able description recorded in summary provenance."""
        return {"name": self.name}
