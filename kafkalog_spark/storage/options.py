"""Object-store options and errors (storage layer): the names users give endpoints, regions and
credentials, the ``pyarrow.fs`` client they build (S3, GCS, Azure; unset options fall to the
store's own provider chain), and the client's errors as the seam raises them.

Names follow delta-rs / object_store (``aws_endpoint_url``, ``aws_region``, ``aws_allow_http``,
``azure_storage_account_key``...), with their short aliases (``endpoint``, ``region``,
``allow_http``, ``access_key_id``...), so one ``storage_options`` dict serves both the log dir
reads here and the Delta table writes of delta-rs. Secrets are listed in :data:`SECRET_OPTIONS`
and :func:`redacted` hides them wherever options are shown.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ..errors import InvalidOptionError, Location, RemoteStorageError

# one canonical name per setting (delta-rs / object_store spelling where one exists) and the
# other spellings users write (object_store's short aliases, pyarrow's names)
OPTION_ALIASES: dict[str, tuple[str, ...]] = {
    "aws_access_key_id": ("access_key_id", "access_key", "aws_access_key"),
    "aws_secret_access_key": ("secret_access_key", "secret_key", "aws_secret_key"),
    "aws_session_token": ("session_token", "token", "aws_token"),
    "aws_region": ("region", "aws_default_region"),
    "aws_endpoint_url": ("endpoint", "endpoint_url", "aws_endpoint", "endpoint_override"),
    "aws_allow_http": ("allow_http",),
    "aws_virtual_hosted_style_request": ("virtual_hosted_style_request",),
    "google_endpoint_url": ("google_endpoint",),
    "google_anonymous": ("anonymous",),
    "google_access_token": ("access_token",),
    "google_project_id": ("project_id",),
    "azure_storage_account_name": ("account_name", "azure_account_name"),
    "azure_storage_account_key": ("account_key", "azure_storage_access_key",
                                  "azure_account_key"),
    "azure_storage_sas_key": ("sas_token", "azure_storage_sas_token", "sas_key"),
    "azure_storage_client_id": ("client_id", "azure_client_id"),
    "azure_storage_client_secret": ("client_secret", "azure_client_secret"),
    "azure_storage_tenant_id": ("tenant_id", "azure_tenant_id"),
    "azure_storage_endpoint": ("azure_endpoint",),
    "azure_storage_use_emulator": ("use_emulator",),
    "timeout": ("request_timeout",),
    "connect_timeout": (),
}
_CANONICAL = {alias: name for name, aliases in OPTION_ALIASES.items()
              for alias in (name, *aliases)}
SECRET_OPTIONS = frozenset({"aws_secret_access_key", "aws_session_token", "google_access_token",
                            "azure_storage_account_key", "azure_storage_sas_key",
                            "azure_storage_client_secret"})
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
_AZURITE_KEY_HINT = "the emulator's account"


def normalize_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """Store options under their canonical names (:data:`OPTION_ALIASES`; case-insensitive,
    ``fs.s3a.``-style dots read as underscores). Unknown names are refused, naming the valid
    ones; values are kept as strings."""
    out: dict[str, str] = {}
    for raw, value in (options or {}).items():
        key = raw.strip().lower().replace(".", "_").replace("-", "_")
        name = _CANONICAL.get(key)
        if name is None:
            raise InvalidOptionError(
                f"unknown storage option {raw!r}; valid: {', '.join(sorted(OPTION_ALIASES))} "
                "(and their aliases: endpoint, region, allow_http, access_key_id, "
                "secret_access_key, account_name, account_key, ...)")
        if value is not None:
            out[name] = str(value)
    return out


# Hadoop's S3A settings (``spark.hadoop.fs.s3a.*`` in a Spark session) and the option each sets
_S3A = {"endpoint": "aws_endpoint_url", "access.key": "aws_access_key_id",
        "secret.key": "aws_secret_access_key", "session.token": "aws_session_token",
        "endpoint.region": "aws_region"}


def from_hadoop(conf: Mapping[str, str]) -> dict[str, str]:
    """Store options from Hadoop S3A settings (keys without the ``spark.hadoop.`` prefix, e.g.
    ``fs.s3a.endpoint``): endpoint, keys, session token, region; ``path.style.access=true``
    turns virtual-hosted requests off and ``connection.ssl.enabled=false`` allows (and
    assumes) plain HTTP for an endpoint given without a scheme."""
    s3a = {k[len("fs.s3a."):]: v for k, v in conf.items() if k.startswith("fs.s3a.")}
    out = {name: s3a[key] for key, name in _S3A.items() if s3a.get(key)}
    if s3a.get("path.style.access", "").lower() == "true":
        out["aws_virtual_hosted_style_request"] = "false"
    if s3a.get("connection.ssl.enabled", "").lower() == "false":
        out["aws_allow_http"] = "true"
        if "aws_endpoint_url" in out and "://" not in out["aws_endpoint_url"]:
            out["aws_endpoint_url"] = "http://" + out["aws_endpoint_url"]
    return out


# options delta-rs (object_store) takes under the same name, per store; the rest are ours
_DELTA_RS = {
    "s3": ("aws_access_key_id", "aws_secret_access_key", "aws_session_token", "aws_region",
           "aws_endpoint_url", "aws_virtual_hosted_style_request"),
    "gs": (),
    "abfs": ("azure_storage_account_name", "azure_storage_account_key", "azure_storage_sas_key",
             "azure_storage_client_id", "azure_storage_client_secret", "azure_storage_tenant_id",
             "azure_storage_endpoint", "azure_storage_use_emulator"),
}


def for_delta_rs(store: str, options: Mapping[str, str], account: str = "") -> dict[str, str]:
    """The ``storage_options`` delta-rs needs to reach the same store as ``options`` do here
    (unset options fall to delta-rs's own provider chain, as here)."""
    out = {k: v for k, v in options.items() if k in _DELTA_RS.get(store, ())}
    endpoint = options.get("aws_endpoint_url") or options.get("azure_storage_endpoint") or ""
    if endpoint.startswith("http://") or _flag(options, "aws_allow_http"):
        out["allow_http"] = "true"
    if store == "s3" and endpoint and "aws_region" not in out:
        out["aws_region"] = "us-east-1"  # as build_filesystem: S3-compatible servers take any
    if store == "abfs" and account and "azure_storage_account_name" not in out:
        out["azure_storage_account_name"] = account
    name = out.get("azure_storage_account_name", "")
    split = urlsplit(endpoint)
    if store == "abfs" and name and split.hostname and not split.path.strip("/") \
            and not split.hostname.startswith(name + "."):
        # a path-style endpoint (an emulator: http://127.0.0.1:10000/<account>): pyarrow takes
        # the authority and adds the account itself, delta-rs wants it in the URL
        out["azure_storage_endpoint"] = endpoint.rstrip("/") + "/" + name
    for name in ("timeout", "connect_timeout"):
        if name in options:
            out[name] = f"{float(options[name]):g}s"
    return out


def redacted(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with every secret's value replaced by ``***`` (for reports and logs)."""
    return {k: "***" if k in SECRET_OPTIONS else v for k, v in options.items()}


def _flag(options: Mapping[str, str], name: str) -> bool:
    return options.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def build_filesystem(store: str, options: Mapping[str, str], account: str = ""):
    """A ``pyarrow.fs`` client from canonical options; unset options fall to the store's own
    provider chain (AWS: environment, profile, instance role; GCS: application default
    credentials; Azure: environment / managed identity)."""
    from pyarrow import fs

    timeout = float(options.get("timeout", DEFAULT_TIMEOUT_S))
    connect = float(options.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT_S))
    if store == "s3":
        kw: dict[str, Any] = dict(request_timeout=timeout, connect_timeout=connect,
                                  retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=3))
        endpoint = options.get("aws_endpoint_url") or os.environ.get("AWS_ENDPOINT_URL_S3") \
            or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            split = urlsplit(endpoint if "://" in endpoint else "https://" + endpoint)
            kw["endpoint_override"] = split.netloc
            kw["scheme"] = split.scheme
            if split.scheme == "http" and not _flag(options, "aws_allow_http") and \
                    not _flag({"x": os.environ.get("AWS_ALLOW_HTTP", "")}, "x"):
                raise InvalidOptionError(
                    f"endpoint {endpoint} is plain HTTP; set the storage option allow_http=true "
                    "to accept an unencrypted connection")
        if "aws_access_key_id" in options:
            kw["access_key"] = options["aws_access_key_id"]
            kw["secret_key"] = options.get("aws_secret_access_key", "")
            if "aws_session_token" in options:
                kw["session_token"] = options["aws_session_token"]
        region = options.get("aws_region") or os.environ.get("AWS_REGION") or \
            os.environ.get("AWS_DEFAULT_REGION")
        if region:
            kw["region"] = region
        elif endpoint:
            kw["region"] = "us-east-1"  # S3-compatible servers take any region
        if "aws_virtual_hosted_style_request" in options:
            kw["force_virtual_addressing"] = _flag(options, "aws_virtual_hosted_style_request")
        return fs.S3FileSystem(**kw)
    if store == "gs":
        from datetime import timedelta

        kw = dict(retry_time_limit=timedelta(seconds=timeout))
        endpoint = options.get("google_endpoint_url")
        if endpoint:
            split = urlsplit(endpoint if "://" in endpoint else "https://" + endpoint)
            kw["endpoint_override"] = split.netloc
            kw["scheme"] = split.scheme
        if _flag(options, "google_anonymous"):
            kw["anonymous"] = True
        if "google_access_token" in options:
            from datetime import datetime, timedelta, timezone

            kw["access_token"] = options["google_access_token"]
            kw["credential_token_expiration"] = datetime.now(timezone.utc) + timedelta(hours=1)
        if "google_project_id" in options:
            kw["project_id"] = options["google_project_id"]
        return fs.GcsFileSystem(**kw)
    if store == "abfs":
        name = options.get("azure_storage_account_name") or account or \
            os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
        if not name:
            raise InvalidOptionError("an Azure URI needs the account: "
                                     "abfss://container@ACCOUNT.dfs.core.windows.net/path or "
                                     "the storage option account_name")
        kw = dict(account_name=name)
        for opt, arg in (("azure_storage_account_key", "account_key"),
                         ("azure_storage_sas_key", "sas_token"),
                         ("azure_storage_client_id", "client_id"),
                         ("azure_storage_client_secret", "client_secret"),
                         ("azure_storage_tenant_id", "tenant_id")):
            if opt in options:
                kw[arg] = options[opt]
        if "account_key" not in kw and os.environ.get("AZURE_STORAGE_ACCOUNT_KEY"):
            kw["account_key"] = os.environ["AZURE_STORAGE_ACCOUNT_KEY"]
        endpoint = options.get("azure_storage_endpoint")
        if endpoint:
            split = urlsplit(endpoint if "://" in endpoint else "https://" + endpoint)
            kw.update(blob_storage_authority=split.netloc, dfs_storage_authority=split.netloc,
                      blob_storage_scheme=split.scheme, dfs_storage_scheme=split.scheme)
        return fs.AzureFileSystem(**kw)
    raise InvalidOptionError(f"unknown object store {store!r}")  # pragma: no cover


# --- errors ------------------------------------------------------------------------------------


def refuse(path: object, what: str) -> RemoteStorageError:
    """The error for an operation an object store cannot do safely at ``path`` (an
    :class:`~kafkalog_spark.storage.paths.ObjectPath` or its URI: ``paths`` imports this
    module, so it is not named here)."""
    return RemoteStorageError(
        f"object storage cannot {what} (no atomic rename, no lock): compact, retain, recover, "
        "rebuild-index and writes into a log dir run on local disks only; copy the log dir to "
        "a local disk, run there, and upload the result", Location(file=str(path)))


_ENDPOINT = re.compile(r"[\w.\-\]\[]*:\d+")  # host:port, [::1]:port, scheme://host:port
_STATUS = re.compile(r"\b[45]\d\d\b")


def store_error(exc: OSError, uri: str, what: str) -> OSError:
    """``exc`` from ``pyarrow.fs`` as an ``OSError`` whose message says what to do and names
    ``uri`` (pyarrow's messages name buckets and keys, never credentials)."""
    text = str(exc)
    low = text.lower()
    # HTTP statuses as whole numbers outside any host:port ("127.0.0.1:40312" is no 403)
    statuses = set(_STATUS.findall(_ENDPOINT.sub(" ", low)))
    if isinstance(exc, FileNotFoundError) or "not found" in low or "nosuchkey" in low \
            or "no such" in low or "404" in statuses and "bucket" not in low:
        if "nosuchbucket" in low or "bucket" in low and "does not exist" in low:
            return FileNotFoundError(errno.ENOENT, "no such bucket", uri)
        return FileNotFoundError(errno.ENOENT, "no such object or folder", uri)
    if "403" in statuses or any(s in low for s in (
            "access denied", "access_denied", "forbidden", "invalidaccesskeyid",
            "signaturedoesnotmatch", "authorization", "authenticat", "credential")):
        return PermissionError(errno.EACCES, "access denied: check the store's credentials "
                               "(storage options, or the provider chain: environment, profile, "
                               "instance role)", uri)
    if "nosuchbucket" in low:
        return FileNotFoundError(errno.ENOENT, "no such bucket", uri)
    if any(s in low for s in ("timeout", "timed out", "curl", "connect", "couldn't resolve",
                              "unreachable", "refused")):
        return TimeoutError(errno.ETIMEDOUT, "the store did not answer (endpoint unreachable "
                            "or too slow after retries); check the endpoint option and the "
                            "network", uri)
    first = text.splitlines()[0] if text else type(exc).__name__
    return OSError(exc.errno or errno.EIO, f"{what} failed: {first}", uri)
