"""Layered configuration: defaults, files, env, flags, validation, describe()."""

from __future__ import annotations

import os
import tomllib
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from repl.config import load as config
from repl.config import schema as config_schema
from repl.config.load import ConfigError, load_settings, with_overrides
from repl.config.redact import masked_key
from repl.config.settings import Limits
from repl.config.show import describe

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-test-0123456789abcdefWXYZ"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolated XDG dirs and a separate working directory."""
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    work = tmp_path / "work"
    work.mkdir()
    return tmp_path


def user_file(home: Path, text: str) -> Path:
    path = home / "xdg_config_home" / "glassloop" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def project_file(home: Path, text: str) -> Path:
    path = home / "work" / "glassloop.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load(home: Path, env: dict[str, str] | None = None, **kwargs):
    return load_settings(cwd=home / "work", env=env or {}, **kwargs)


def config_error(home: Path, text: str, **kwargs) -> str:
    path = project_file(home, text)
    with pytest.raises(ConfigError) as info:
        load(home, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


# ---- defaults -------------------------------------------------------------------


def test_defaults_load(home: Path) -> None:
    s = load(home)
    assert s.provider == "local" and s.provider_auto is True
    assert s.approval == "ask" and s.system_prompt == "" and s.weather == "open-meteo"
    assert s.guards == Limits(8, 60000, 3, 300.0, 30.0, 8000)
    assert set(s.providers) == {"openai", "deepseek", "ollama", "vllm", "local", "local-large"}
    openai = s.providers["openai"]
    assert (openai.model, openai.base_url, openai.api) == ("gpt-4o-mini", "https://api.openai.com/v1", "chat")
    assert (openai.price_input, openai.price_cached_input, openai.price_output) == (0.15, 0.075, 0.60)
    assert isinstance(openai.timeout_s, float)
    local = s.active
    assert local.name == "local" and local.tool_call_format == "text" and local.n_ctx == local.context_window == 16384
    assert s.data_dir == home / "xdg_data_home" / "glassloop"
    assert s.todos_file == s.data_dir / "todos.json"
    assert s.notes_file == s.data_dir / "notes.json"
    assert s.files_root == home / "work"
    assert s.trace_enabled and s.trace_dir == home / "xdg_state_home" / "glassloop" / "traces"
    assert s.mcp_servers == {}
    assert s.sources["guards.max_steps"] == "default"
    assert s.sources["providers.local.model"] == "default"
    assert s.config_files == (config.DEFAULT_FILE,)


def test_settings_are_frozen(home: Path) -> None:
    s = load(home)
    with pytest.raises(FrozenInstanceError):
        s.approval = "auto"  # type: ignore[misc]


def test_packaged_defaults_equal_documented_file() -> None:
    packaged = ROOT / "repl" / "config" / "default_config.toml"
    assert packaged.read_bytes() == (ROOT / "config.toml").read_bytes()
    assert config.DEFAULT_FILE == packaged


def test_default_file_covers_every_schema_key() -> None:
    data = tomllib.loads((ROOT / "config.toml").read_text(encoding="utf-8"))
    flat: dict = {}
    config_schema.flatten(data, config_schema.SCHEMA, "", "default", flat)
    profile = config_schema.SCHEMA["providers"].schema
    for section in ("guards", "tools", "trace"):
        for key in config_schema.SCHEMA[section]:
            assert f"{section}.{key}" in flat
    for name in ("openai", "deepseek", "ollama", "vllm"):
        missing = {k for k in profile if f"providers.{name}.{k}" not in flat}
        assert missing == {"model_path", "n_ctx", "threads", "compact_results",
                           "call_temperature", "unmatched", "keep_warm_s"}, name
    assert all(f"providers.{name}.{k}" in flat for k in profile for name in ("local", "local-large"))


def test_every_default_key_is_commented() -> None:
    lines = (ROOT / "config.toml").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            assert "#" in line or lines[i - 1].lstrip().startswith("#"), line


# ---- layers and sources -------------------------------------------------------


def test_each_layer_overrides_the_lower_one(home: Path) -> None:
    user = user_file(home, 'approval = "read-only"\n[guards]\nmax_steps = 4\nrepeat_limit = 5\n'
                           "[trace]\nenabled = false\n")
    project = project_file(home, "[guards]\nmax_steps = 5\nmax_turn_tokens = 1000\n")
    explicit = home / "explicit.toml"
    explicit.write_text('[guards]\nmax_steps = 6\n[tools]\nweather = "sample"\n', encoding="utf-8")
    s = load(home, config_file=explicit)
    assert s.approval == "read-only" and s.sources["approval"] == str(user)
    assert s.guards.repeat_limit == 5 and s.sources["guards.repeat_limit"] == str(user)
    assert s.guards.max_turn_tokens == 1000 and s.sources["guards.max_turn_tokens"] == str(project)
    assert s.guards.max_steps == 6 and s.sources["guards.max_steps"] == str(explicit)
    assert s.weather == "sample" and s.trace_enabled is False
    assert s.config_files == (config.DEFAULT_FILE, user, project, explicit)

    s = load(home, env={"GLASSLOOP_MAX_STEPS": "7"}, config_file=explicit)
    assert s.guards.max_steps == 7 and s.sources["guards.max_steps"] == "env GLASSLOOP_MAX_STEPS"

    s = load(home, env={"GLASSLOOP_MAX_STEPS": "7", "GLASSLOOP_APPROVAL": "ask"},
             flags={"max_steps": 9, "yes": True}, config_file=explicit)
    assert s.guards.max_steps == 9 and s.sources["guards.max_steps"] == "flag --max-steps"
    assert s.approval == "auto" and s.sources["approval"] == "flag --yes"


def test_relative_config_file_is_relative_to_cwd(home: Path) -> None:
    (home / "work" / "mine.toml").write_text('approval = "auto"\n', encoding="utf-8")
    s = load(home, config_file=Path("mine.toml"))
    assert s.approval == "auto" and s.sources["approval"] == str(home / "work" / "mine.toml")


def test_env_variables_map_to_keys(home: Path) -> None:
    env = {"GLASSLOOP_PROVIDER": "ollama", "GLASSLOOP_MODEL": "llama3.2", "GLASSLOOP_API": "responses",
           "GLASSLOOP_TODOS_FILE": "t.json", "GLASSLOOP_NOTES_FILE": "~/n.json",
           "GLASSLOOP_FILES_ROOT": "sandbox", "GLASSLOOP_WEATHER": "sample",
           "OPENAI_MODEL": "gpt-4.1", "GLASSLOOP_APPROVAL": ""}
    s = load(home, env=env)
    assert s.provider == "ollama" and s.provider_auto is False
    assert s.active.model == "llama3.2" and s.active.api == "responses"
    assert s.sources["providers.ollama.model"] == "env GLASSLOOP_MODEL"
    assert s.providers["openai"].model == "gpt-4.1"
    assert s.sources["providers.openai.model"] == "env OPENAI_MODEL"
    assert s.todos_file == home / "work" / "t.json"
    assert s.notes_file == Path("~/n.json").expanduser()
    assert s.files_root == home / "work" / "sandbox"
    assert s.weather == "sample"
    assert s.approval == "ask"  # an empty variable counts as unset


def test_glassloop_model_beats_openai_model_and_flag_beats_both(home: Path) -> None:
    env = {"OPENAI_API_KEY": SECRET, "OPENAI_MODEL": "a", "GLASSLOOP_MODEL": "b"}
    assert load(home, env=env).active.model == "b"
    s = load(home, env=env, flags={"model": "c", "base_url": "http://127.0.0.1:9/v1"})
    assert s.active.model == "c" and s.sources["providers.openai.model"] == "flag --model"
    assert s.active.base_url == "http://127.0.0.1:9/v1"


def test_top_level_model_and_base_url_set_the_active_profile(home: Path) -> None:
    """The obvious first line, ``model = "x"``, is a key: the active provider's model."""
    user = user_file(home, 'model = "x"\nbase_url = "http://127.0.0.1:9/v1"\n')
    s = load(home)
    assert s.provider == "openai" and s.provider_auto  # a base URL chooses the OpenAI-compatible profile
    assert (s.active.model, s.active.base_url) == ("x", "http://127.0.0.1:9/v1")
    assert s.sources["providers.openai.model"] == f"{user}: model"
    assert s.providers["deepseek"].model == "deepseek-chat"  # only the active profile
    rows = {key: (value, source) for key, value, source in describe(s)}
    assert rows["model"] == ("x", str(user)) and rows["base_url"] == ("http://127.0.0.1:9/v1", str(user))
    assert rows["providers.openai.model"] == ("x", f"{user}: model")
    ollama = load(home, flags={"provider": "ollama"})
    assert (ollama.active.model, ollama.active.base_url) == ("x", "http://127.0.0.1:9/v1")
    user_file(home, 'base_url = "http://me:pw-secret-1234@127.0.0.1:9/v1"\n')
    assert "pw-secret-1234" not in repr(describe(load(home)))


def test_top_level_model_and_the_profile_key_the_later_layer_wins(home: Path) -> None:
    user_file(home, 'model = "user-top"\n[providers.openai]\nmodel = "user-profile"\n')
    env = {"OPENAI_API_KEY": SECRET}
    assert load(home, env=env).active.model == "user-profile"  # one file: the profile's own key
    project_file(home, 'model = "project-top"\n')
    assert load(home, env=env).active.model == "project-top"
    project_file(home, '[providers.openai]\nmodel = "project-profile"\n')
    user_file(home, 'model = "user-top"\n')
    assert load(home, env=env).active.model == "project-profile"
    assert load(home, env={**env, "GLASSLOOP_MODEL": "by-env"}).active.model == "by-env"
    assert load(home, env=env, flags={"model": "by-flag"}).active.model == "by-flag"


def test_an_untrusted_project_file_sets_the_top_level_model_but_not_base_url(home: Path) -> None:
    project = project_file(home, 'model = "repo-model"\nbase_url = "http://127.0.0.1:9/v1"\n')
    s = load(home, env={"OPENAI_API_KEY": SECRET})
    assert s.active.model == "repo-model" and s.active.base_url == "https://api.openai.com/v1"
    assert s.project is not None and s.project.path == project and list(s.project.ignored) == ["base_url"]
    local = load(home)  # no key: the URL it asked for does not choose the profile either
    assert local.provider == "local" and local.active.base_url == ""


def test_a_misspelt_top_level_model_still_names_the_file_and_key(home: Path) -> None:
    message = config_error(home, 'modle = "x"\n')
    assert "modle: unknown key" in message and "did you mean model?" in message


def test_flags_apply_to_the_active_profile(home: Path, tmp_path: Path) -> None:
    flags = {"provider": "vllm", "model": "m", "api": "responses", "todos_file": tmp_path / "x.json",
             "trace": False, "approval": "read-only", "yes": False, "notes_file": None}
    s = load(home, flags=flags)
    assert s.provider == "vllm" and s.active.model == "m" and s.active.api == "responses"
    assert s.providers["openai"].model == "gpt-4o-mini"
    assert s.todos_file == tmp_path / "x.json" and s.sources["tools.todos_file"] == "flag --todos-file"
    assert s.trace_enabled is False and s.sources["trace.enabled"] == "flag --no-trace"
    assert s.approval == "read-only"


def test_unknown_flag_is_a_programming_error(home: Path) -> None:
    with pytest.raises(ValueError, match="max_stepz"):
        load(home, flags={"max_stepz": 3})


def test_paths_in_files_are_relative_to_cwd_and_expand_home(home: Path) -> None:
    user_file(home, '[tools]\ntodos_file = "data/todos.json"\nnotes_file = "~/notes.json"\n'
                       'files_root = "~"\n[trace]\ndir = "traces"\n')
    s = load(home)
    assert s.todos_file == home / "work" / "data" / "todos.json"
    assert s.notes_file == Path.home() / "notes.json"
    assert s.files_root == Path.home()
    assert s.trace_dir == home / "work" / "traces"


# ---- provider = "auto" ----------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "flags", "expected"),
    [
        ({}, {}, "local"),
        ({"OPENAI_API_KEY": SECRET}, {}, "openai"),
        ({"OPENAI_API_KEY": ""}, {}, "local"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}, {}, "openai"),
        ({"GLASSLOOP_BASE_URL": "http://127.0.0.1:8080/v1"}, {}, "openai"),
        ({}, {"base_url": "http://127.0.0.1:8080/v1"}, "openai"),
        ({"DEEPSEEK_API_KEY": SECRET}, {}, "local"),
    ],
)
def test_auto_provider(home: Path, env: dict, flags: dict, expected: str) -> None:
    s = load(home, env=env, flags=flags)
    assert s.provider == expected and s.provider_auto is True
    assert s.active.name == expected


def test_auto_base_url_lands_on_the_openai_profile(home: Path) -> None:
    s = load(home, env={"GLASSLOOP_BASE_URL": "http://127.0.0.1:8080/v1"})
    assert s.active.base_url == "http://127.0.0.1:8080/v1"
    assert s.sources["providers.openai.base_url"] == "env GLASSLOOP_BASE_URL"
    assert s.active.api_key == ""


def test_api_key_comes_from_the_profile_variable(home: Path) -> None:
    s = load(home, env={"OPENAI_API_KEY": SECRET, "DEEPSEEK_API_KEY": "dk-other-123456789"})
    assert s.active.api_key == SECRET
    assert s.providers["deepseek"].api_key == "dk-other-123456789"
    assert s.providers["ollama"].api_key == ""
    assert s.sources["providers.openai.api_key"] == "env OPENAI_API_KEY"
    assert SECRET not in repr(s) and SECRET not in repr(s.active)


def test_explicit_provider_is_not_auto(home: Path) -> None:
    user_file(home, 'provider = "deepseek"\n')
    s = load(home, env={"OPENAI_API_KEY": SECRET})
    assert s.provider == "deepseek" and s.provider_auto is False


def test_an_embedded_profiles_window_is_its_n_ctx_unless_set_lower(home: Path) -> None:
    from repl.loop.cost import context_window_for

    path = user_file(home, "[providers.local]\nn_ctx = 16384\n[providers.local-large]\nn_ctx = 2048\n"
                           "context_window = 1024\n")
    s = load(home)
    local, large = s.providers["local"], s.providers["local-large"]
    assert (local.n_ctx, local.context_window, context_window_for(s)) == (16384, 16384, 16384)
    assert s.sources["providers.local.context_window"] == str(path)  # from n_ctx's layer
    assert (large.n_ctx, large.context_window) == (2048, 1024)
    user_file(home, "[providers.local]\ncontext_window = 100000\n")  # never more than the server holds
    local = load(home).providers["local"]
    assert local.context_window == local.n_ctx


# ---- user profiles and MCP servers ----------------------------------------------


def test_user_defined_provider_profile(home: Path) -> None:
    path = user_file(home, 'provider = "work"\n[providers.work]\nbase_url = "http://127.0.0.1:7/v1"\n'
                           'api_key_env = "WORK_KEY"\nmodel = "big"\ntemperature = 1\n')
    s = load(home, env={"WORK_KEY": "wk-secret-value-9876"})
    work = s.active
    assert (work.name, work.base_url, work.model) == ("work", "http://127.0.0.1:7/v1", "big")
    assert work.temperature == 1.0 and isinstance(work.temperature, float)
    assert work.api_key == "wk-secret-value-9876"
    assert (work.api, work.tool_call_format, work.max_tokens) == ("chat", "native", 2048)
    assert s.sources["providers.work.model"] == str(path)
    assert s.sources["providers.work.max_tokens"] == "default"


def test_empty_user_profile_exists(home: Path) -> None:
    project_file(home, "[providers.blank]\n")
    s = load(home, flags={"provider": "blank", "model": "x"})
    assert s.active.name == "blank" and s.active.model == "x" and s.active.base_url == ""


def test_mcp_servers_are_accepted(home: Path) -> None:
    user_file(home, '[mcp.servers.fs]\ncommand = "fs-server"\nargs = ["."]\nenv = { TOKEN = "t" }\n'
                       '[mcp.servers.web]\nurl = "http://127.0.0.1:9/mcp"\n')
    s = load(home)
    assert s.mcp_servers["fs"] == {"command": "fs-server", "args": ["."], "env": {"TOKEN": "t"},
                                   "cwd": "", "url": "", "headers": {}}
    assert s.mcp_servers["web"]["url"] == "http://127.0.0.1:9/mcp"


# ---- errors -----------------------------------------------------------------------


def test_syntax_error_names_file_and_line(home: Path) -> None:
    message = config_error(home, '[guards]\nmax_steps = 3\napproval = "ask\n')
    assert "invalid TOML" in message and "line 3" in message


def test_unknown_top_level_key(home: Path) -> None:
    message = config_error(home, 'aproval = "ask"\n')
    assert "aproval: unknown key" in message and "approval" in message


def test_unknown_key_inside_a_provider(home: Path) -> None:
    message = config_error(home, "[providers.openai]\ntemprature = 0.5\n")
    assert "providers.openai.temprature: unknown key" in message
    assert "did you mean temperature?" in message


def test_unknown_key_inside_a_user_profile(home: Path) -> None:
    message = config_error(home, '[providers.mine]\nmodel = "m"\napi_key = "sk-in-a-file"\n')
    assert "providers.mine.api_key: unknown key" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[providers.openai]\ntemperature = "hot"\n',
         'providers.openai.temperature: expected a number, got "hot"'),
        ('[guards]\nmax_steps = "8"\n', 'guards.max_steps: expected an integer, got "8"'),
        ("[guards]\nmax_steps = 2.5\n", "guards.max_steps: expected an integer, got 2.5"),
        ("[guards]\nmax_steps = true\n", "guards.max_steps: expected an integer, got true"),
        ("[providers.openai]\nprice_input = false\n",
         "providers.openai.price_input: expected a number, got false"),
        ("[guards]\nmax_steps = 0\n", "guards.max_steps: expected an integer >= 1, got 0"),
        ("[providers.openai]\nmodel = 4\n", "providers.openai.model: expected a string, got 4"),
        ('[trace]\nenabled = "yes"\n', 'trace.enabled: expected true or false, got "yes"'),
        ('guards = "strict"\n', 'guards: expected a table, got "strict"'),
        ('[mcp.servers.x]\ncommand = "c"\nargs = ["a", 1]\n',
         "mcp.servers.x.args[1]: expected a string, got 1"),
        ('[mcp.servers.x]\ncwd = "."\n', "mcp.servers.x: expected a command or a url"),
    ],
)
def test_wrong_type(home: Path, text: str, expected: str) -> None:
    assert expected in config_error(home, text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('approval = "sometimes"\n',
         'approval: expected one of ask, auto, read-only, got "sometimes"'),
        ('[tools]\nweather = "rain"\n', "tools.weather: expected one of open-meteo, sample"),
        ('[providers.openai]\napi = "grpc"\n', "providers.openai.api: expected one of chat, responses"),
        ('provider = "nobody"\n', 'provider: expected auto or one of openai, deepseek'),
    ],
)
def test_bad_enum(home: Path, text: str, expected: str) -> None:
    assert expected in config_error(home, text)


def test_bad_env_value_names_the_variable(home: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config error in env GLASSLOOP_MAX_STEPS: "
                                          r'guards\.max_steps: expected an integer, got "many"$'):
        load(home, env={"GLASSLOOP_MAX_STEPS": "many"})
    with pytest.raises(ConfigError, match="env GLASSLOOP_APPROVAL: approval: expected one of"):
        load(home, env={"GLASSLOOP_APPROVAL": "yes"})
    with pytest.raises(ConfigError, match="flag --provider: provider: expected auto or one of"):
        load(home, flags={"provider": "nobody"})


def test_missing_explicit_config_file(home: Path) -> None:
    missing = home / "nope.toml"
    with pytest.raises(ConfigError, match=f"^config error in {missing}: file not found$"):
        load(home, config_file=missing)


def test_missing_optional_files_are_fine(home: Path) -> None:
    assert load(home).config_files == (config.DEFAULT_FILE,)


def test_unreadable_file(home: Path) -> None:
    path = project_file(home, 'approval = "ask"\n')
    path.chmod(0)
    if os.access(path, os.R_OK):  # root reads anything; a directory cannot be read as a file
        path.unlink()
        path.mkdir()
    with pytest.raises(ConfigError, match=f"^config error in {path}: cannot read"):
        load(home)


def test_not_utf8(home: Path) -> None:
    path = home / "work" / "glassloop.toml"
    path.write_bytes(b'system_prompt = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load(home)


# ---- pricing and the session budget ------------------------------------------------


def test_default_prices_and_budget(home: Path) -> None:
    s = load(home)
    assert s.pricing["gpt-4.1-mini"] == config.ModelPrice(0.40, 0.10, 1.60)  # a name with a dot
    assert s.pricing["gpt-4o"] == config.ModelPrice(2.50, 1.25, 10.00)
    assert (s.guards.session_budget_usd, s.guards.session_budget_tokens) == (0.0, 0)
    rows = {key: (value, source) for key, value, source in describe(s)}
    assert rows['pricing."gpt-4.1-mini".output'] == ("1.6", "default")
    assert rows["pricing.gpt-4o.input"] == ("2.5", "default")
    assert rows["guards.session_budget_usd"] == ("0.0", "default")


def test_pricing_layers_merge_per_key_and_cached_defaults_to_input(home: Path) -> None:
    path = project_file(home, '[pricing."gpt-4.1-mini"]\noutput = 2.0\n'
                              "[guards]\nsession_budget_usd = 0.5\nsession_budget_tokens = 100000\n")
    user_file(home, '[pricing."acme/model.v2"]\ninput = 1.0\noutput = 3.0\n')
    s = load(home)
    assert s.pricing["gpt-4.1-mini"] == config.ModelPrice(0.40, 0.10, 2.0)
    assert s.pricing["acme/model.v2"] == config.ModelPrice(1.0, 1.0, 3.0)
    assert s.sources['pricing."gpt-4.1-mini".output'] == str(path)
    assert s.sources['pricing."gpt-4.1-mini".input'] == "default"
    assert (s.guards.session_budget_usd, s.guards.session_budget_tokens) == (0.5, 100000)


def test_price_lookup_order(home: Path) -> None:
    from repl.loop.cost import price_for

    s = load(home, env={"OPENAI_API_KEY": SECRET})
    assert price_for(s) == s.pricing["gpt-4o-mini"]  # the table wins over the profile's keys
    routed = with_overrides(s, model="openai/gpt-4o")
    assert price_for(routed) == s.pricing["gpt-4o"]  # "vendor/model" as routers spell it
    own = with_overrides(s, model="in-house", price_input=1.0, price_cached_input=0.0, price_output=2.0)
    assert price_for(own) == config.ModelPrice(1.0, 1.0, 2.0)  # the profile's keys as a fallback
    assert price_for(with_overrides(s, provider="ollama")) is None  # no price: "cost unknown"


@pytest.mark.parametrize("text, expected", [
    ('[pricing."m.1"]\ninput = 1.0\n', 'pricing."m.1": expected input and output prices'),
    ('[pricing."m.1"]\ninput = 1.0\noutput = 1.0\ncached = 0.5\n',
     'pricing."m.1".cached: unknown key (expected one of input, cached_input, output); did you mean cached_input?'),
    ('[pricing."m.1"]\ninput = "cheap"\noutput = 1.0\n', 'pricing."m.1".input: expected a number, got "cheap"'),
    ("[guards]\nsession_budget_tokens = -1\n", "guards.session_budget_tokens: expected an integer >= 0, got -1"),
    ("[guards]\nsession_budget_usd = true\n", "guards.session_budget_usd: expected a number, got true"),
])
def test_bad_pricing_and_budget(home: Path, text: str, expected: str) -> None:
    assert expected in config_error(home, text)


# ---- describe and runtime overrides ----------------------------------------------


def test_describe_redacts_keys_and_names_sources(home: Path) -> None:
    user = user_file(home, '[mcp.servers.fs]\ncommand = "x"\nenv = { TOKEN = "secret-token-value-1234" }\n')
    s = load(home, env={"OPENAI_API_KEY": SECRET, "DEEPSEEK_API_KEY": "dk-tiny"})
    rows = describe(s)
    text = repr(rows)
    assert SECRET not in text and "secret-token-value" not in text and "dk-tiny" not in text
    by_key = {key: (value, source) for key, value, source in rows}
    assert by_key["providers.openai.api_key"] == ("sk-…WXYZ", "env OPENAI_API_KEY")
    assert by_key["providers.deepseek.api_key"][0] == "(set)"
    assert by_key["providers.ollama.api_key"][0] == "(not set)"
    assert by_key["provider"] == ("openai (auto)", "default")
    assert by_key["guards.max_steps"] == ("8", "default")
    assert by_key["mcp.servers.fs.command"] == ("x", str(user))
    for name in s.providers:
        assert f"providers.{name}.model" in by_key and f"providers.{name}.price_output" in by_key
    assert all(isinstance(v, str) for row in rows for v in row)


def test_describe_marks_a_profiles_prices_and_window_as_another_models(home: Path) -> None:
    """``--model m`` over a profile priced for gpt-4o-mini: its prices and window stay listed, said
    to be another model's (price_for and context_window_for do not use them for m)."""
    env = {"OPENAI_API_KEY": SECRET}
    own = {key: source for key, _, source in describe(load(home, env))}
    assert own["providers.openai.price_input"] == own["providers.openai.context_window"] == "default"
    rows = {key: (value, source) for key, value, source in describe(load(home, env, flags={"model": "m"}))}
    assert rows["providers.openai.model"] == ("m", "flag --model")
    for key in ("price_input", "price_cached_input", "price_output", "context_window"):
        value, source = rows[f"providers.openai.{key}"]
        assert source == "default (another model's: not used with m)", (key, source)
    assert rows["providers.deepseek.price_input"][1] == "default"  # its own model's
    assert rows["providers.ollama.price_input"] == ("0.0", "default")


def test_redact() -> None:
    assert masked_key("") == "(not set)"
    assert masked_key("abc") == "(set)"
    assert masked_key("sk-proj-abcdefghijklmnop") == "sk-…mnop"
    assert masked_key("plainsecretvalue99") == "…ue99"


def test_with_overrides(home: Path) -> None:
    s = load(home, env={"OPENAI_API_KEY": SECRET})
    t = with_overrides(s, provider="deepseek", model="deepseek-reasoner", approval="auto",
                       max_steps=3)
    assert t.provider == "deepseek" and t.provider_auto is False
    assert t.active.model == "deepseek-reasoner" and t.providers["openai"].model == "gpt-4o-mini"
    assert t.approval == "auto" and t.guards.max_steps == 3
    assert t.sources["providers.deepseek.model"] == "runtime" and t.sources["approval"] == "runtime"
    assert s.provider == "openai" and s.approval == "ask" and s.sources["approval"] == "default"
    assert with_overrides(t, model="m").providers["deepseek"].model == "m"


def test_with_overrides_rejects_bad_values(home: Path) -> None:
    s = load(home)
    with pytest.raises(ConfigError, match='provider: expected one of .*got "nope"'):
        with_overrides(s, provider="nope")
    with pytest.raises(ConfigError, match="approval: expected one of ask, auto, read-only"):
        with_overrides(s, approval="always")
    with pytest.raises(ConfigError, match="providers.local.temperature: expected a number"):
        with_overrides(s, temperature="warm")
    with pytest.raises(TypeError):
        with_overrides(s, colour="blue")


def test_import_stays_light() -> None:
    import subprocess
    import sys

    code = ("import sys, repl.config.load; heavy = {'rich', 'openai', 'typer', 'prompt_toolkit', "
            "'httpx', 'jsonschema', 'difflib'}; print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
