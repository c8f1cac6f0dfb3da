"""The root group, shared options, and output helpers.

Every command takes ``--db``, ``--user`` and ``--json`` before or after its name (:func:`json_option`
adds the three to each command).  Read commands open the memory through :attr:`Context.reading`, which
creates no file, folder or user.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from narrative.config import default_db
from narrative.engine import Memory
from narrative.errors import ConversationAlreadyActive, InvalidTransition, NarrativeError, NotFound, ValidationError
from narrative.interfaces.serialize import to_json

F = TypeVar("F", bound=Callable[..., Any])

LLM_PROVIDERS = ("none", "ollama", "openai")


@dataclass
class Context:
    db: str | None
    user: str | None
    as_json: bool
    embedder: str | None
    llm: dict[str, Any] = field(default_factory=dict)
    user_given: bool = False  # --user was on the command line (not only NARRATIVE_USER)
    _memory: Memory | None = None

    @property
    def memory(self) -> Memory:
        """The memory, creating the file and the user when missing (write commands)."""
        if self._memory is None:
            self._memory = self._open()
            self._note_other_users(self._memory)
        return self._memory

    @property
    def serving(self) -> Memory:
        """The memory for a server of every user (``serve``): created when missing, without a note about the
        default user (the server answers each key's own user)."""
        if self._memory is None:
            self._memory = self._open()
        return self._memory

    @property
    def reading(self) -> Memory:
        """The memory for a read command: refused (NotFound) when the file or the user does not exist, so
        reading creates nothing; a user without data in a file that holds others' is named on stderr."""
        return self.existing(user=True)

    def existing(self, *, user: bool) -> Memory:
        """The memory of a file that must exist (and, with ``user``, must know the user): opens nothing new."""
        if self._memory is None:
            path = self.db or default_db()
            is_url = path.startswith(("postgresql://", "postgres://"))
            if path != ":memory:" and not is_url and not Path(path).is_file():
                raise NotFound(
                    f"no database at {path}: nothing has been stored there yet (a write such as"
                    " `narrative add message TEXT` creates it; --db PATH or NARRATIVE_DB chooses the file)"
                )
            memory = self._open()
            users = memory.users()
            if user and memory.user not in users:
                memory.close()
                raise NotFound(f"user {memory.user!r} has no data in {memory.settings.db}{_naming(users)}")
            self._memory = memory
            if user:
                self._note_other_users(memory)
        return self._memory

    def _open(self) -> Memory:
        overrides: dict[str, Any] = {k: v for k, v in self.llm.items() if v is not None}
        if self.embedder:
            overrides["embedder"] = self.embedder
        return Memory(self.db, user=self.user, **overrides)

    def _note_other_users(self, memory: Memory) -> None:
        """Say so when this user holds nothing while the file holds other users' data."""
        users = memory.users()
        if users.get(memory.user):
            return
        others = sorted(name for name, held in users.items() if held and name != memory.user)
        if others:
            click.echo(
                f"note: user {memory.user!r} has nothing stored in {memory.settings.db} yet; it holds data of"
                f" {users_named(others)} (--user NAME or NARRATIVE_USER chooses whose memory)",
                err=True,
            )

    def emit(self, value: Any, text: Callable[[], str] | str | None = None) -> None:
        """Print ``value`` as JSON with --json, else the human ``text`` (or JSON when none)."""
        if self.as_json or text is None:
            click.echo(to_json(value))
        else:
            click.echo(text() if callable(text) else text)


def _naming(users: dict[str, dict[str, int]]) -> str:
    named = sorted(name for name, held in users.items() if held)
    if not named:
        return ""
    return f"; it holds data of {users_named(named)} (choose with --user NAME or NARRATIVE_USER)"


def users_named(names: list[str]) -> str:
    """User names for a message: as they are, but quoted when they would not read as themselves (spaces at an
    end, a comma, a tab or another unprintable character): "user 'maya' has no data; it holds data of ' maya '"."""
    return ", ".join(n if n and n == n.strip() and n.isprintable() and "," not in n else repr(n) for n in names)


def error_kind(error: NarrativeError) -> str:
    """The ``error`` word of the HTTP API's error body for this error."""
    kinds: list[tuple[type[NarrativeError], str]] = [
        (NotFound, "not_found"),
        (ValidationError, "validation_error"),
        (ConversationAlreadyActive, "conversation_already_active"),
        (InvalidTransition, "invalid_transition"),
    ]
    return next((kind for cls, kind in kinds if isinstance(error, cls)), "bad_request")


#: the Context of the running command, for the error handler (``--json`` may come after the command)
CURRENT: list[Context] = []


@click.group(
    help="narrative: offline-first narrative memory for LLM agents.  Options of this group (--db, --user, "
    "--json) may also follow the command.  Every NARRATIVE_* setting: docs/cli.md."
)
@click.option(
    "--db",
    envvar="NARRATIVE_DB",
    default=None,
    help="SQLite file or postgresql:// URL [env NARRATIVE_DB; default: the data directory's narrative.db, which"
    " `narrative path` prints].",
)
@click.option(
    "--user", envvar="NARRATIVE_USER", default=None, help="Whose memory [env NARRATIVE_USER; default 'default']."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output (errors too).")
@click.option(
    "--embedder",
    type=click.Choice(["minilm", "hashing", "none"]),
    default=None,
    help="Embedding model [env NARRATIVE_EMBEDDER; default minilm; 'none' = keyword search only].",
)
@click.option(
    "--llm",
    "llm_provider",
    type=click.Choice(LLM_PROVIDERS),
    default=None,
    help="LLM provider [env NARRATIVE_LLM_PROVIDER; default none: heuristics only].",
)
@click.option("--llm-url", default=None, help="LLM server URL [env NARRATIVE_LLM_URL].")
@click.option("--llm-model", default=None, help="LLM model name [env NARRATIVE_LLM_MODEL].")
@click.option("--llm-key", default=None, help="LLM API key [env NARRATIVE_LLM_API_KEY].")
@click.option(
    "--llm-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds per LLM call [env NARRATIVE_LLM_TIMEOUT_S; default 30].",
)
@click.version_option(package_name="narrative")
@click.pass_context
def cli(
    ctx: click.Context,
    db: str | None,
    user: str | None,
    as_json: bool,
    embedder: str | None,
    llm_provider: str | None,
    llm_url: str | None,
    llm_model: str | None,
    llm_key: str | None,
    llm_timeout: float | None,
) -> None:
    llm = {
        "llm_provider": llm_provider,
        "llm_url": llm_url,
        "llm_model": llm_model,
        "llm_api_key": llm_key,
        "llm_timeout_s": llm_timeout,
    }
    _refuse_empty_db(db)
    given = ctx.get_parameter_source("user") is click.core.ParameterSource.COMMANDLINE
    ctx.obj = Context(db=db, user=user, as_json=as_json, embedder=embedder, llm=llm, user_given=given)
    CURRENT[:] = [ctx.obj]
    ctx.call_on_close(lambda: ctx.obj._memory.close() if ctx.obj._memory is not None else None)


pass_ctx = click.make_pass_decorator(Context)


def _refuse_empty_db(db: str | None) -> None:
    """``--db ""`` (an unset shell variable, say) named no file: it used the default file without a word."""
    if db is not None and not db.strip():
        raise click.BadParameter(
            "is empty: name a SQLite file or a postgresql:// URL (leave --db out for the default file)",
            param_hint="--db",
        )


def _setter(attribute: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def store(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if attribute == "db":
            _refuse_empty_db(value)
        if value:
            setattr(ctx.find_object(Context), attribute, value)
            if attribute == "user":
                setattr(ctx.find_object(Context), "user_given", True)  # noqa: B010

    return store


def json_option(f: F) -> F:
    """``--json``, ``--db`` and ``--user`` accepted after the command name too (they override the global ones)."""
    f = click.option(
        "--user",
        "user_local",
        default=None,
        expose_value=False,
        callback=_setter("user"),
        help="Whose memory (same as the global --user).",
    )(f)
    f = click.option(
        "--db",
        "db_local",
        default=None,
        expose_value=False,
        callback=_setter("db"),
        help="SQLite file (same as the global --db).",
    )(f)
    return click.option(
        "--json",
        "as_json_local",
        is_flag=True,
        expose_value=False,
        callback=_setter("as_json"),
        help="Machine-readable JSON output.",
    )(f)
