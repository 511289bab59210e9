"""The exception hierarchy: every error the library raises (contracts, executors, actions) derives from
DataContractError."""

from __future__ import annotations


class DataContractError(Exception):
    """Root of every error raised by spark-data-contracts."""


class ContractWarning(UserWarning):
    """A contract that loads but will not do what it seems to: e.g. a rule no executor handles,
    which fails every record (docs/semantics.md §2.1)."""


class ContractError(DataContractError):
    """A contract that cannot run: bad JSON, an unknown kind/mode/type, a bad expression.

    Carries the subject, version, rule name and the offending field or expression position so
    tests (and users) can assert on them rather than on wording.
    """

    def __init__(
        self,
        message: str,
        *,
        subject: str | None = None,
        version: int | None = None,
        rule: str | None = None,
        position: str | int | None = None,
    ) -> None:
        self.reason = message
        self.subject = subject
        self.version = version
        self.rule = rule
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        where = [
            f"{label} {value!r}" if isinstance(value, str) else f"{label} {value}"
            for label, value in (
                ("subject", self.subject),
                ("version", self.version),
                ("rule", self.rule),
                ("at", self.position),
            )
            if value is not None
        ]
        return f"{self.reason} ({', '.join(where)})" if where else self.reason

    def at(
        self,
        *,
        subject: str | None = None,
        version: int | None = None,
    ) -> ContractError:
        """Return a copy that also names the subject and version, keeping what is known."""
        error = ContractError(
            self.reason,
            subject=self.subject if self.subject is not None else subject,
            version=self.version if self.version is not None else version,
            rule=self.rule,
            position=self.position,
        )
        error.__cause__ = self.__cause__
        return error


class RegistryError(DataContractError):
    """The schema registry answered with an error, or could not be reached.

    `status` is the HTTP status (None when no answer came), `error_code` Confluent's code
    (40401 subject not found, 40402 version not found, 40403 schema not found, 42201 invalid
    schema, 409 incompatible, 50001-50003 server errors).
    """

    def __init__(self, message: str, *, status: int | None = None, error_code: int | None = None) -> None:
        self.reason = message
        self.status = status
        self.error_code = error_code
        detail = ", ".join(
            f"{label} {value}"
            for label, value in (("status", status), ("error_code", error_code))
            if value is not None
        )
        super().__init__(f"{message} ({detail})" if detail else message)


class SerializationError(DataContractError):
    """Bytes that are not a valid Confluent frame or Avro body, or a record Avro cannot encode."""


class RuleError(DataContractError):
    """An ERROR action fired: names the subject, version, rule and mode that failed."""

    def __init__(
        self,
        message: str,
        *,
        subject: str | None = None,
        version: int | None = None,
        rule: str | None = None,
        mode: str | None = None,
    ) -> None:
        self.reason = message
        self.subject = subject
        self.version = version
        self.rule = rule
        self.mode = mode
        super().__init__(
            f"Rule {rule!r} failed in {mode} on subject {subject!r} version {version}: {message}"
        )


def in_one_line(error: BaseException) -> str:
    """`Type: message`, the message's lines joined on one line: the text a job fails with when the
    engine raises where rows are processed, as the native path fails it (docs/semantics.md §9.9)."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
