"""Every setting, declared once: these dataclasses are the configuration's schema.

A field's type gives the value's TOML type (a ``Literal`` is a closed set of
values); its ``setting()`` metadata gives the rest: the dotted key, the least
value, the environment variable and the flag that set it, the option of the
``glassloop`` command, and what an untrusted project file may do with it. From
them ``config_schema`` checks every layer and maps the environment and flags,
``config`` builds ``Settings``, ``config_show`` lists the ``glassloop config``
rows, ``trust`` screens a project file and ``cli`` makes the command's options.
The documented values live in ``config.toml`` (= ``repl/config/default_config.toml``);
the field defaults are the fallbacks for keys a file leaves out, and the tests
hold the two together. Adding a setting is a field here plus its default and
comment in ``config.toml``.

Annotations are evaluated (no ``from __future__ import annotations``): the
schema is read from them. Standard library and ``repl.config.project`` (the types of the project's
file and tools folder as read) only: on the start-up path.
"""

import dataclasses
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, get_args

from repl.config.project import ProjectTrust, ToolsTrust

ApprovalMode = Literal["ask", "auto", "read-only"]
Api = Literal["chat", "responses"]
ToolCallFormat = Literal["native", "text"]
Unmatched = Literal["text", "chat", "free"]
Weather = Literal["open-meteo", "sample"]
# What an untrusted ./glassloop.toml may do with a key: set it, only make it stricter, nothing.
ProjectRule = Literal["safe", "tighten", "trust"]
# Why a guard stopped a turn (``TurnFinished.stopped_by``, beside the loop's own reasons).
GuardReason = Literal["max_steps", "budget", "repeat", "timeout"]
RUNTIME = "runtime"  # the source of a value changed while running (/model, /provider, /approve)
# What the loop counts in a turn, for a guard to bound: model calls, tokens (input + output),
# tool calls, seconds (the user's pauses not counted).
TurnCount = Literal["steps", "tokens", "tool_calls", "seconds"]


@dataclass(frozen=True)
class Bound:
    """A guard's check: before each model call, once the turn's ``count`` reaches the guard's
    value the turn stops for ``reason`` (one more call, without tools, for the answer);
    ``says`` is why, formatted with ``used`` and ``limit``."""

    count: TurnCount
    reason: GuardReason
    says: str


@dataclass(frozen=True)
class Meta:
    """What ``setting()`` records about a field (``field.metadata["setting"]``)."""

    key: str = ""  # the dotted key; "" = the field's name within its table
    minimum: float | None = None  # numbers: the least value (None: 0)
    maximum: float | None = None  # numbers: the greatest value (None: no bound)
    url: bool = False  # a string that is an http(s) URL or ""
    env: str = ""  # the environment variable that sets it (a profile key: in the active profile)
    sdk_env: str = ""  # the openai SDK's variable that sets it in the openai profile
    flag: str = ""  # its name in ``load_settings(flags=...)``, shown as ``flag --name``
    cli: str = ""  # help text: the flag is also an option of the glassloop command
    project: ProjectRule = "trust"
    tighter: str | tuple[Any, ...] = "lower"  # "tighten": "lower", "higher", or values strictest first
    zero_is_no_limit: bool = False  # "tighten": 0 means no limit, so any other value is stricter
    # a path (relative to the working directory, ~ expanded); what "" means: ("data", NAME) or
    # ("state", NAME) under the user's data or state dir, ("cwd",), or ("unset",): stays ""
    empty: tuple[str, ...] = ()
    local_only: bool = False  # a profile key of the embedded model only (a --flag sets the local profile)
    secret: bool = False  # shown redacted
    named: type | None = None  # a table of user-named tables of this dataclass (for a dict field)
    quoted: bool = False  # named tables whose names may hold dots (quoted in dotted keys)
    bound: Bound | None = None  # a guard on a turn's count: its check, which the agent loop applies


def setting(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
            repr: bool = True, **meta: Any) -> Any:  # noqa: A002 - dataclasses.field's name
    """A dataclass field that is a key of the configuration (``Meta`` says what of it)."""
    info = {"setting": Meta(**meta)}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, repr=repr, metadata=info)
    return field(default=default, repr=repr, metadata=info)


guard = partial(setting, project="tighten")  # every guard may be tightened by a project file
safe = partial(setting, project="safe")  # how the model answers: a project file may set it


@dataclass(frozen=True)
class Limits:
    """``[guards]``: the bounds of each turn (the agent loop's) and of the session.

    A guard with a ``bound`` is checked as declared there, before each model call; the others
    are applied where they act: ``repeat_limit`` to each call, ``tool_timeout_s`` and
    ``max_tool_result_chars`` to each call's result, the session's budgets through its cost."""

    max_steps: int = guard(8, minimum=1, env="GLASSLOOP_MAX_STEPS", flag="max_steps",
                           cli="Most model calls per turn.",
                           bound=Bound("steps", "max_steps", "reached the limit of {limit} steps"))
    max_turn_tokens: int = guard(60_000, minimum=1,
                                 bound=Bound("tokens", "budget", "used {used} of {limit} tokens"))
    repeat_limit: int = guard(3, minimum=1)  # identical calls (tool + canonical arguments) per turn
    # also the turn's deadline: a model call gets it, a tool call at most the time left
    turn_timeout_s: float = guard(300.0,
                                  bound=Bound("seconds", "timeout", "the turn ran over {limit:g} s"))
    tool_timeout_s: float = guard(30.0)
    max_tool_result_chars: int = guard(8_000, minimum=1)
    session_budget_usd: float = guard(0.0, zero_is_no_limit=True)
    session_budget_tokens: int = guard(0, zero_is_no_limit=True)

    def bounds(self) -> list[tuple[Bound, float]]:
        """Each guard's ``bound`` with its value, in declaration order (the loop checks them so)."""
        return [(meta.bound, getattr(self, f.name)) for f in dataclasses.fields(self)
                if (meta := f.metadata["setting"]).bound is not None]


# The profiles the embedded llama.cpp server runs; each name is also the extra that
# installs its weights (repl/embedded/weights.py: BUNDLED). "local-large" is opt-in.
EMBEDDED_PROFILES = ("local", "local-large")


@dataclass(frozen=True)
class ProviderSettings:
    """``[providers.NAME]``: one endpoint profile, handed as it is to the provider adapter.

    The defaults are the fallbacks for keys a profile leaves out; ``temperature`` and
    ``max_tokens`` None (an adapter made in code) are not sent.
    """

    name: str
    base_url: str = setting("", url=True, env="GLASSLOOP_BASE_URL", sdk_env="OPENAI_BASE_URL",
                            flag="base_url", cli="OpenAI-compatible base URL (e.g. http://localhost:8000/v1).")
    api_key_env: str = setting("")
    api_key: str = field(default="", repr=False)  # resolved from the environment: not a key
    model: str = safe("", env="GLASSLOOP_MODEL", sdk_env="OPENAI_MODEL", flag="model",
                      cli="Model name for the active provider.")
    api: Api = safe("chat", env="GLASSLOOP_API", flag="api", cli="Wire API: chat or responses.")
    tool_call_format: ToolCallFormat = safe("native")
    temperature: float | None = safe(0.2)
    max_tokens: int | None = safe(2048, minimum=1)
    context_window: int = safe(32768, minimum=1)
    timeout_s: float = safe(60.0)
    max_retries: int = safe(2)
    price_input: float = setting(0.0)  # USD per million tokens; 0 = unknown
    price_cached_input: float = setting(0.0)
    price_output: float = setting(0.0)
    model_path: str = setting("", flag="model_path", local_only=True, empty=("unset",))  # "": bundled
    n_ctx: int = setting(16384, minimum=1, local_only=True)  # the embedded profiles' context_window too
    threads: int = setting(0, local_only=True)  # 0 = auto
    # text tool calls: results sent as compact text of at most this many chars (0: the stored JSON)
    compact_results: int = safe(0, local_only=True)
    # a question's first model call goes with a router's choice of tools (tool_choice: none, one
    # tool, or any), made by meaning from the tools' own text; False: no router, requests as they are
    router: bool = safe(False)
    # a step's first token and every token of a tool call sampled at min(temperature, this)
    call_temperature: float = safe(0.1, local_only=True)
    # routed (embedded): a question the router sends to no tool is answered in text, or the
    # model is free to call any tool or answer
    unmatched: Unmatched = safe("free", local_only=True)
    # the embedded server outlives glassloop by this many seconds without a request, so that the
    # next start finds it warm (0: it stops with glassloop)
    keep_warm_s: float = setting(0.0, local_only=True, env="GLASSLOOP_KEEP_WARM_S")

    @property
    def embedded(self) -> bool:
        """Served by the embedded llama.cpp server (its ``local_only`` keys apply)."""
        return self.name in EMBEDDED_PROFILES


@dataclass(frozen=True)
class ModelPrice:
    """``[pricing."MODEL"]``: USD per million tokens (``cached_input`` defaults to ``input``).
    A higher price only trips a budget sooner: a project file may raise one."""

    input: float = setting(project="tighten", tighter="higher")
    cached_input: float = setting(project="tighten", tighter="higher")
    output: float = setting(project="tighten", tighter="higher")


@dataclass(frozen=True)
class McpServer:
    """``[mcp.servers.NAME]``: a command (stdio) or a url; ``Settings.mcp_servers`` holds
    each as a table for ``tools.mcp_client``, the None keys only when set."""

    command: str = setting("")
    args: list[str] = setting(factory=list)
    env: dict[str, str] = setting(factory=dict, secret=True)
    cwd: str = setting("")
    url: str = setting("", url=True)
    headers: dict[str, str] = setting(factory=dict, secret=True)
    read_only_tools: list[str] | None = setting(None)
    timeout_s: float | None = setting(None)  # None: guards.tool_timeout_s


# The points of a turn where the user's own commands run (``[[hooks.EVENT]]``, docs/HOOKS.md).
HookEvent = Literal["user_prompt_submit", "pre_tool_use", "post_tool_use", "stop", "session_start"]


@dataclass(frozen=True)
class HookCommand:
    """``[[hooks.EVENT]]``: one program run at a point of the loop (``repl/session/user_hooks.py``).
    It reads one JSON object on stdin and answers by its exit status and optional JSON on stdout."""

    command: list[str] = setting()  # the program and its arguments (argv), never a shell string
    timeout_s: float = setting(10.0, minimum=0.1, maximum=600.0)  # then killed, with its group
    origin: str = field(default="", compare=False)  # the file it was read from (not a key)

    def said(self) -> str:
        """The command as a person would type it (``python3 guard.py``)."""
        import shlex  # off the start-up path

        return shlex.join(self.command)


@dataclass(frozen=True)
class ToolHookCommand(HookCommand):
    """``[[hooks.pre_tool_use]]``, ``[[hooks.post_tool_use]]``: for the tools ``matcher`` names."""

    matcher: str = setting("")  # a tool-name pattern (fnmatch glob: "delete_*"); "" = every tool


@dataclass(frozen=True)
class HookSettings:
    """``[hooks]``: the user's commands at each ``HookEvent``, in the order the files list them
    (a later file's commands run after an earlier one's: the lists add up, they never replace)."""

    # a hook's "allow" approves a side effect the approval rules would ask about (otherwise the
    # person is still asked)
    may_approve: bool = setting(False)
    user_prompt_submit: list[HookCommand] = setting(factory=list)
    pre_tool_use: list[ToolHookCommand] = setting(factory=list)
    post_tool_use: list[ToolHookCommand] = setting(factory=list)
    stop: list[HookCommand] = setting(factory=list)
    session_start: list[HookCommand] = setting(factory=list)

    def of(self, event: HookEvent) -> list[HookCommand]:
        commands: list[HookCommand] = getattr(self, event)
        return commands

    def configured(self) -> bool:
        """Whether any event has a hook."""
        return any(self.of(event) for event in get_args(HookEvent))


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every layer merged, each value with its source. The ``setting()`` fields are the
    files' keys, in the order ``glassloop config`` lists them; the rest are resolved."""

    provider: str = setting("auto", env="GLASSLOOP_PROVIDER", flag="provider",
                            cli="Provider profile: openai, deepseek, ollama, vllm, local, or your own.")
    # a file's top-level model and base URL: the active profile's, unless the profile's own key is
    # set in the same or a later layer ("" = the profile's)
    model: str = safe("")
    base_url: str = setting("", url=True)
    providers: dict[str, ProviderSettings] = setting(factory=dict)
    approval: ApprovalMode = setting("ask", env="GLASSLOOP_APPROVAL", flag="approval",
                                     cli="Approval mode: ask, auto or read-only.",
                                     project="tighten", tighter=("read-only", "ask", "auto"))
    system_prompt: str = safe("", flag="system_prompt")
    # AGENTS.md (the user's and the working folder's): the first this many KB of each join the
    # instructions; 0 reads none. A project file may only lower it.
    instructions_max_kb: int = setting(32, key="instructions.max_kb", project="tighten", tighter="lower")
    show_reasoning: bool = safe(True)  # a reasoning model's thinking, dimmed (/reasoning on|off)
    guards: Limits = setting(factory=Limits)
    todos_file: Path = setting(Path(), key="tools.todos_file", env="GLASSLOOP_TODOS_FILE",
                               flag="todos_file", empty=("data", "todos.json"))
    notes_file: Path = setting(Path(), key="tools.notes_file", env="GLASSLOOP_NOTES_FILE",
                               flag="notes_file", empty=("data", "notes.json"))
    files_root: Path = setting(Path(), key="tools.files_root", env="GLASSLOOP_FILES_ROOT",
                               flag="files_root", empty=("cwd",))
    weather: Weather = safe("open-meteo", key="tools.weather", env="GLASSLOOP_WEATHER", flag="weather")
    trust_project_tools: bool = setting(False, key="tools.trust_project_tools")
    trace_enabled: bool = setting(True, key="trace.enabled", flag="trace", project="tighten",
                                  tighter=(True, False))
    trace_dir: Path = setting(Path(), key="trace.dir", flag="trace_dir", empty=("state", "traces"))
    trace_raw: bool = setting(True, key="trace.raw")  # each model call's request and response bodies
    trace_raw_max_kb: int = setting(2048, key="trace.raw_max_kb", minimum=1)  # per session, oldest dropped
    # OpenTelemetry spans of each turn, to an OTLP/HTTP collector (the otel extra)
    otel_export: bool = setting(False, key="otel.export", flag="otel",
                                cli="Export each turn as OpenTelemetry spans ([otel] endpoint).")
    otel_endpoint: str = setting("", key="otel.endpoint", url=True)  # "": the OTEL_EXPORTER_OTLP_* variables
    otel_content: bool = setting(False, key="otel.content")  # messages and tool arguments in the spans
    # an MCP server's time to start and list its tools; the first turn (REPL or ask) waits for it that long
    mcp_startup_timeout_s: float = setting(10.0, key="mcp.startup_timeout_s", minimum=0.1)
    mcp_servers: dict[str, dict[str, Any]] = setting(factory=dict, key="mcp.servers", named=McpServer)
    pricing: dict[str, ModelPrice] = setting(factory=dict, quoted=True)  # by model name
    hooks: HookSettings = setting(factory=HookSettings)  # the user's own commands: code, so trust

    provider_auto: bool = False  # True when provider = "auto" chose it
    data_dir: Path = Path()
    state_dir: Path = Path()
    config_dir: Path = Path()  # the user's: config.toml, trust.json, tools/
    sources: dict[str, str] = field(default_factory=dict)  # dotted key -> "default" | file | "env X" | "flag --x"
    config_files: tuple[Path, ...] = ()  # files read, lowest layer first
    project: ProjectTrust | None = None  # ./glassloop.toml as read, and what it was not allowed to set
    project_tools: ToolsTrust | None = None  # ./.glassloop/tools when it holds tool files
    tool_files: tuple[Path, ...] = ()  # --tools FILE

    @property
    def active(self) -> ProviderSettings:
        return self.providers[self.provider]

    def of_its_model(self, profile: ProviderSettings, keys: tuple[str, ...]) -> bool:
        """Whether ``profile``'s ``keys`` (its prices, its context window) describe the model it
        names: a layer no earlier than the one that chose the model set one of them. A model
        chosen later (``--model``, the environment, ``/model``) does not inherit them."""
        model = self._rank(f"providers.{profile.name}.model")
        return max(self._rank(f"providers.{profile.name}.{key}") for key in keys) >= model

    def _rank(self, key: str) -> int:
        """How late the layer that set ``key`` comes: defaults, files in order, env, flags, runtime."""
        source = self.sources.get(key, "default")
        if source == "default":
            return 0
        for prefix, rank in (("env ", 1000), ("flag ", 2000), (RUNTIME, 3000)):
            if source.startswith(prefix):
                return rank
        files = [str(path) for path in self.config_files]
        return 1 + files.index(source) if source in files else 0
