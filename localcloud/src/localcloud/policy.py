"""IAM policy evaluation as AWS documents it, for the local cloud's requests (moto's is weaker).

moto checks a request's identity policies only against the resource it names for S3, SQS, IAM and STS
(every other service's requests are checked against ``*``, which a statement with an ARN never matches),
skips most conditions (only ``StringEquals`` of values the request carries; ``StringLike``, ``ArnEquals``
and ``Bool`` count as met) and never reads a resource policy. Here, per AWS's evaluation logic
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html), within one
account:

- an explicit ``Deny`` in any applicable policy (identity or resource) denies;
- else an ``Allow`` in an identity policy of the principal, or in the resource's policy naming the
  principal, allows;
- else the request is denied implicitly.

``Action`` / ``NotAction`` match case-insensitively, ``Resource`` / ``NotResource`` case-sensitively, both
with ``*`` and ``?``; the condition operators the template uses (``String*``, ``Arn*``, ``Bool``, with
``...IfExists``) are evaluated against the request's context keys. Every resource a request touches must be
allowed (Glue's ``BatchCreatePartition`` needs its catalog, database and table).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any

#: request context: condition key (lower case) -> its values
Context = Mapping[str, list[str]]


class Effect(Enum):
    ALLOW = "Allow"
    DENY = "Deny"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    #: the resource the decision is about (the first one denied)
    resource: str
    #: why a request is denied, in AWS's words ("no identity-based policy allows the ... action")
    why: str = ""


@lru_cache(maxsize=4096)
def _pattern(glob: str, case: bool) -> re.Pattern[str]:
    # IAM wildcards: * (any run, across ':' and '/'), ? (one character); nothing else is special
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(regex, re.DOTALL if case else re.DOTALL | re.IGNORECASE)


def wildcard_match(pattern: str, value: str, *, case: bool = True) -> bool:
    return _pattern(pattern, case).fullmatch(value) is not None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _element(statement: Mapping[str, Any], name: str, value: str, *, case: bool) -> bool | None:
    """Whether ``value`` is covered by the statement's ``name`` (or excluded by ``Not<name>``); None when
    the statement has neither (a resource policy's statement without ``Resource`` covers its resource)."""
    if name in statement:
        return any(wildcard_match(p, value, case=case) for p in _as_list(statement[name]))
    if "Not" + name in statement:
        return not any(wildcard_match(p, value, case=case) for p in _as_list(statement["Not" + name]))
    return None


def _principal_matches(principal: Any, caller: str, role_arn: str | None) -> bool:
    """A resource policy's ``Principal`` against the caller (an assumed-role session, or a service name)."""
    if principal == "*":
        return True
    if not isinstance(principal, Mapping):
        return False
    for kind, names in principal.items():
        for name in _as_list(names):
            if name in ("*", caller) or (kind == "AWS" and role_arn is not None and name == role_arn):
                return True
    return False


_NEGATED = ("StringNotEquals", "StringNotEqualsIgnoreCase", "StringNotLike", "ArnNotEquals", "ArnNotLike")


def _operator_matches(operator: str, expected: list[str], actual: list[str]) -> bool:
    base = operator.removesuffix("IfExists")
    if base in ("StringEquals", "StringNotEquals"):
        hit = any(a == e for a in actual for e in expected)
    elif base in ("StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase"):
        hit = any(a.lower() == e.lower() for a in actual for e in expected)
    elif base in ("StringLike", "StringNotLike", "ArnLike", "ArnNotLike", "ArnEquals", "ArnNotEquals"):
        hit = any(wildcard_match(e, a) for a in actual for e in expected)
    elif base == "Bool":
        hit = any(a.lower() == e.lower() for a in actual for e in expected)
    else:
        raise ValueError(f"condition operator {operator} is not evaluated locally")
    return not hit if base in _NEGATED else hit


def conditions_met(condition: Mapping[str, Any] | None, context: Context) -> bool:
    """Every operator and key of a ``Condition`` block holds (AND), any value of a key matching (OR)."""
    for operator, keys in (condition or {}).items():
        qualifier, _, op = operator.rpartition(":")  # ForAnyValue: / ForAllValues: read as the plain operator
        del qualifier
        for key, expected in keys.items():
            actual = context.get(key.lower())
            if actual is None:
                if op.endswith("IfExists") or op.removesuffix("IfExists") in _NEGATED:
                    continue
                return False
            if not _operator_matches(op, [str(e) for e in _as_list(expected)], actual):
                return False
    return True


def _applies(statement: Mapping[str, Any], action: str, resource: str, context: Context) -> bool:
    if not _element(statement, "Action", action, case=False):
        return False
    if _element(statement, "Resource", resource, case=True) is False:
        return False
    return conditions_met(statement.get("Condition"), context)


def statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(_as_list(policy.get("Statement", [])))


def policy_owner(resource: str) -> str:
    """The resource whose policy governs ``resource``: an S3 object's bucket, else the resource itself."""
    if resource.startswith("arn:") and resource.split(":", 3)[2] == "s3":
        return resource.split("/", 1)[0]
    return resource


def evaluate(
    *,
    caller: str,
    action: str,
    resources: Iterable[str],
    context: Context,
    identity: Iterable[Mapping[str, Any]] = (),
    resource_policies: Mapping[str, Iterable[Mapping[str, Any]]] | None = None,
    role_arn: str | None = None,
) -> Decision:
    """Whether ``caller`` may do ``action`` on every one of ``resources``.

    ``identity``: the caller's identity policies (none for a service principal such as
    ``events.amazonaws.com``); ``resource_policies``: resource ARN -> the policies attached to it (a
    bucket's covers its objects too). ``role_arn``: the role an assumed-role
    session belongs to, which a resource policy may name instead of the session.
    """
    identity_statements = [s for p in identity for s in statements(p)]
    by_resource = resource_policies or {}
    for resource in resources:
        attached = [s for p in by_resource.get(policy_owner(resource), ()) for s in statements(p)]
        attached = [s for s in attached if _principal_matches(s.get("Principal"), caller, role_arn)]
        allowed_by: str | None = None
        for kind, found in (("identity-based", identity_statements), ("resource-based", attached)):
            for statement in found:
                if not _applies(statement, action, resource, context):
                    continue
                if statement.get("Effect") == Effect.DENY.value:
                    article = "an" if kind[0] in "aeiou" else "a"
                    return Decision(False, resource, f"with an explicit deny in {article} {kind} policy")
                allowed_by = allowed_by or kind
        if allowed_by is None:
            kind = "identity-based" if identity_statements or not attached else "resource-based"
            return Decision(False, resource, f"because no {kind} policy allows the {action} action")
    return Decision(True, "")


def denied_message(caller: str, action: str, decision: Decision) -> str:
    """AWS's AccessDenied message: who, which action, on which resource, and why."""
    return f"User: {caller} is not authorized to perform: {action} on resource: {decision.resource} {decision.why}"
