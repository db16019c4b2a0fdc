"""The library's own errors. The CLI turns a `WmtpError` into one `error: ...` line and exit 1."""


class WmtpError(Exception):
    """Bad input or an impossible request: a user-facing error, never a bug."""


class UnknownSpecError(WmtpError, KeyError):
    """A registry key that does not exist; the message lists the known keys."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ConfigError(WmtpError):
    """A Hugging Face config.json that cannot be turned into a model row."""


class ProfileError(WmtpError):
    """A measured profile that is missing, corrupt or of an unknown schema version."""
