"""See an agent's HTTP side effects without rewriting it: transports for httpx and httpx2.

Under ``conform`` every request whose method is not GET, HEAD or OPTIONS becomes one
effect: ``ctx.effect("POST https://api.example/v1/charges", body, key=<Idempotency-Key>)``.
The body is the argument (parsed when it is JSON), the ``Idempotency-Key`` header the key.
For a key the harness has seen, the stored first response comes back and nothing is sent
again, as an idempotent remote answers. Outside ``conform`` the requests just go out.

Three ways in, for ``httpx.Client`` and ``httpx.AsyncClient`` alike::

    from crashresume.adapters import http

    client = httpx.Client(transport=http.transport(inner))  # a new client (inner: optional)
    client = http.instrument(client)                          # around an existing client
    with http.patched():                                      # every default transport
        ...

``instrument`` also takes an SDK client built on httpx: the OpenAI and Anthropic Python
clients keep theirs as ``._client``, so a model call becomes an effect too, and an agent
that asks the model again for a step it had already decided shows up as
``duplicate_effect`` on the model's endpoint. The OpenAI client 3.x is built on httpx2
(the same API, other classes): each function works with whichever module its client or
inner transport comes from, and an inner transport of the other module is bridged (an
httpx2 client can be served by respx or any ``httpx.MockTransport``).

Under ``conform(faults=...)`` the faulted request is answered as HTTP would: ``lost`` and
``slow`` raise the module's ``ReadTimeout`` (the request acted, or lands later), ``fail`` is a
503, ``rate_limited`` a 429 with ``Retry-After: 0`` (neither acted), ``malformed`` a 200
whose JSON body is cut short (it acted). A model call is a request like any other.

Recorded responses are read whole before they are returned (a streamed answer arrives at
once); effect args and stored responses are plain data, so process mode can ship them.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import Any

from crashresume._context import current_context
from crashresume._errors import UsageError
from crashresume._faults import EffectTimeout, InjectedFault, MalformedAnswer

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})  # never side effects: not recorded
FLAVOURS = ("httpx", "httpx2")  # the modules this adapter speaks
KEY_HEADER = "Idempotency-Key"
MALFORMED_BODY = b'{"id": "chatcmpl-1", "choices": [{"message": {"content": "'  # cut short
_DROPPED = frozenset({b"content-encoding", b"content-length", b"transfer-encoding"})

# (status, headers, content): a response as the harness stores it under its key.
Stored = tuple[int, list[tuple[bytes, bytes]], bytes]


def _module(flavour: str) -> ModuleType:
    if flavour not in FLAVOURS:
        raise UsageError(f"flavour={flavour!r}: use one of {', '.join(map(repr, FLAVOURS))}")
    try:
        return importlib.import_module(flavour)
    except ImportError as exc:
        raise UsageError(
            f"crashresume.adapters.http needs {flavour}: pip install 'crashresume[httpx]'"
        ) from exc


def flavour_of(thing: Any) -> str | None:
    """'httpx' or 'httpx2' when ``thing`` is an object of that module, else None."""
    for kind in type(thing).__mro__:
        root = kind.__module__.partition(".")[0]
        if root in FLAVOURS:
            return root
    return None


def describe(request: Any) -> tuple[str, Any, str | None]:
    """The effect a request is: its name, its argument (the body) and its key."""
    body = request.content
    arg: Any = None
    if body:
        try:
            text = body.decode()
        except UnicodeDecodeError:
            arg = bytes(body)
        else:
            arg = text
            if "json" in request.headers.get("content-type", ""):
                with suppress(ValueError):
                    arg = json.loads(text)
    return f"{request.method} {request.url}", arg, request.headers.get(KEY_HEADER)


def _freeze(response: Any, content: bytes) -> Stored:
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _DROPPED]
    return response.status_code, headers, content


def _thaw(module: ModuleType, stored: Stored, request: Any) -> Any:
    status, headers, content = stored
    return module.Response(status, headers=headers, content=content, request=request)


def _foreign(request: Any, module: ModuleType) -> Any:
    """``request`` as a request of ``module`` (bridging httpx and httpx2)."""
    return module.Request(
        request.method, str(request.url), headers=request.headers.raw, content=request.content
    )


def _send(
    handle: Callable[[Any], Any], inner: ModuleType, module: ModuleType, request: Any
) -> Stored:
    """Send through ``handle`` (a transport of module ``inner``) and read the answer whole."""
    response = handle(request if inner is module else _foreign(request, inner))
    try:
        return _freeze(response, response.read())
    finally:
        response.close()


async def _send_async(
    handle: Callable[[Any], Awaitable[Any]], inner: ModuleType, module: ModuleType, request: Any
) -> Stored:
    response = await handle(request if inner is module else _foreign(request, inner))
    try:
        return _freeze(response, await response.aread())
    finally:
        await response.aclose()


def _record(
    handle: Callable[[Any], Any], inner: ModuleType, module: ModuleType, request: Any
) -> Any:
    """Send ``request`` as one effect of the running start; the response to give back."""
    ctx = current_context()
    if ctx is None or request.method in SAFE_METHODS:  # not an effect: just send it
        if inner is module:
            return handle(request)
        return _thaw(module, _send(handle, inner, module, request), request)
    request.read()
    name, arg, key = describe(request)
    try:
        stored = ctx.effect(name, arg, key, perform=lambda: _send(handle, inner, module, request))
    except InjectedFault as fault:
        return _faulted(module, fault, request)
    return _thaw(module, stored, request)


async def _record_async(
    handle: Callable[[Any], Awaitable[Any]], inner: ModuleType, module: ModuleType, request: Any
) -> Any:
    ctx = current_context()
    if ctx is None or request.method in SAFE_METHODS:
        if inner is module:
            return await handle(request)
        return _thaw(module, await _send_async(handle, inner, module, request), request)
    await request.aread()
    name, arg, key = describe(request)

    def perform() -> Awaitable[Stored]:
        return _send_async(handle, inner, module, request)

    try:
        stored = await ctx.effect_async(name, arg, key, perform=perform)
    except InjectedFault as fault:
        return _faulted(module, fault, request)
    return _thaw(module, stored, request)


def _faulted(module: ModuleType, fault: InjectedFault, request: Any) -> Any:
    """What the client sees of an injected fault (``conform(faults=...)``), as HTTP shows it."""
    if isinstance(fault, EffectTimeout):
        raise module.ReadTimeout(str(fault), request=request) from fault
    if isinstance(fault, MalformedAnswer):  # the remote acted; its JSON answer is cut short
        headers = [(b"content-type", b"application/json")]
        return module.Response(200, headers=headers, content=MALFORMED_BODY, request=request)
    limited = fault.fault == "rate_limited"
    headers = [(b"retry-after", b"0")] if limited else []
    body = json.dumps({"error": {"message": str(fault)}}).encode()
    headers.append((b"content-type", b"application/json"))
    return module.Response(429 if limited else 503, headers=headers, content=body, request=request)


@functools.cache
def _classes(flavour: str) -> tuple[type[Any], type[Any]]:
    """The two transport classes for one module, made the first time they are needed."""
    module = _module(flavour)

    class EffectTransport(module.BaseTransport):  # type: ignore[name-defined,misc]
        """Records every non-GET/HEAD/OPTIONS request as a ``ctx.effect``; ``inner`` sends."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self._inner_module = _module(flavour_of(inner) or flavour)

        def handle_request(self, request: Any) -> Any:
            return _record(self.inner.handle_request, self._inner_module, module, request)

        def close(self) -> None:
            self.inner.close()

    class AsyncEffectTransport(module.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        """The async twin of ``EffectTransport``, for ``AsyncClient``."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self._inner_module = _module(flavour_of(inner) or flavour)

        async def handle_async_request(self, request: Any) -> Any:
            handle = self.inner.handle_async_request
            return await _record_async(handle, self._inner_module, module, request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    return EffectTransport, AsyncEffectTransport


def transport(inner: Any = None, *, flavour: str | None = None) -> Any:
    """A transport for ``Client(transport=...)`` that records effects; ``inner`` sends.

    ``flavour`` ('httpx' or 'httpx2') is the client's module; by default that of ``inner``,
    or httpx. Without ``inner`` requests go out through the module's ``HTTPTransport()``.
    """
    module = _module(flavour or flavour_of(inner) or "httpx")
    if inner is None:
        inner = module.HTTPTransport()
    return _classes(module.__name__)[0](inner)


def async_transport(inner: Any = None, *, flavour: str | None = None) -> Any:
    """``transport`` for ``AsyncClient(transport=...)``."""
    module = _module(flavour or flavour_of(inner) or "httpx")
    if inner is None:
        inner = module.AsyncHTTPTransport()
    return _classes(module.__name__)[1](inner)


def instrument(client: Any, *, inner: Any = None) -> Any:
    """Route every transport of an existing client through the harness; returns the client.

    Takes an ``httpx.Client``/``AsyncClient`` (or httpx2's), or an SDK client that keeps one
    as ``._client`` (``openai.OpenAI``, ``anthropic.Anthropic``). Its default transport and
    its mounts are wrapped; with ``inner`` (a transport of either module, e.g. a mock) the
    default transport is replaced by one that sends through ``inner`` instead::

        model = http.instrument(openai.OpenAI(base_url=URL, api_key="test"), inner=mock)

    Instrumenting twice is a no-op.
    """
    flavour = flavour_of(client)
    inner_client = getattr(client, "_client", None)
    if flavour is None and inner_client is not None and flavour_of(inner_client):
        instrument(inner_client, inner=inner)
        return client
    if flavour is None:
        raise UsageError(
            f"instrument() takes an httpx or httpx2 client, or an SDK client built on one; got "
            f"{type(client).__name__!r}. Pass http_client=httpx.Client(transport="
            "http.transport()) to the SDK instead."
        )
    module = _module(flavour)
    sync, asynchronous = _classes(flavour)
    wrapper = asynchronous if isinstance(client, module.AsyncClient) else sync
    if inner is not None:
        client._transport = wrapper(inner)
    elif not isinstance(client._transport, wrapper):
        client._transport = wrapper(client._transport)
    for pattern, mounted in list(client._mounts.items()):
        if mounted is not None and not isinstance(mounted, wrapper):
            client._mounts[pattern] = wrapper(mounted)
    return client


@contextmanager
def patched() -> Iterator[None]:
    """Route the default transports (``HTTPTransport``, ``AsyncHTTPTransport``) through the
    harness while the block runs, for every installed flavour; nested blocks are fine.

    Use it around ``conform``, or inside a factory that is a context manager, so it covers
    exactly the duration of each start::

        @contextlib.contextmanager
        def make_agent(ctx):
            with http.patched():
                yield MyAgent(ctx)
    """
    undo: list[Callable[[], None]] = []
    for flavour in FLAVOURS:
        try:
            module = importlib.import_module(flavour)
        except ImportError:
            continue
        undo.extend(_patch(module))
    if not undo:
        raise UsageError("http.patched() needs httpx or httpx2: pip install 'crashresume[httpx]'")
    try:
        yield
    finally:
        for restore in reversed(undo):
            restore()


def _patch(module: ModuleType) -> list[Callable[[], None]]:
    sync_class, async_class = module.HTTPTransport, module.AsyncHTTPTransport
    sync_original = sync_class.handle_request
    async_original = async_class.handle_async_request

    def handle_request(self: Any, request: Any) -> Any:
        return _record(functools.partial(sync_original, self), module, module, request)

    async def handle_async_request(self: Any, request: Any) -> Any:
        handle = functools.partial(async_original, self)
        return await _record_async(handle, module, module, request)

    sync_class.handle_request = handle_request
    async_class.handle_async_request = handle_async_request

    def restore_sync() -> None:
        sync_class.handle_request = sync_original

    def restore_async() -> None:
        async_class.handle_async_request = async_original

    return [restore_sync, restore_async]
