"""Structured output: ``prompt(..., output_schema=...)``'s final answer, checked and retried.

Claude's ``output_format`` and the OpenAI Agents SDK's ``output_type``: the final answer must
be JSON matching a schema. With a model whose API constrains replies to a schema
(``supports_output_schema``: the Anthropic and OpenAI providers), the schema goes with every
request and the last reply's text is the answer. With any other model, a ``respond`` tool
whose parameters are the schema is offered, and its call's input is the answer (the call ends
the run). Either way the answer is validated with ``jsonschema``: a bad one gets a correction
the model can act on (a ``custom_message`` entry, or the ``respond`` call's error result), at
most ``retries`` times, then :class:`OutputValidationError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import orjson
from attrs import define, field, frozen

from hooks import AssistantMessage, CustomMessage, JSONValue, Message, ToolResultMessage

from .._tools.base import Tool, ToolResult, ToolRun
from .errors import OutputValidationError
from .schema import check_schema, convert, schema_of

if TYPE_CHECKING:
    import jsonschema

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "OUTPUT_CORRECTION_TYPE",
    "RESPOND_TOOL_NAME",
    "OutputCheck",
    "OutputSpec",
]

RESPOND_TOOL_NAME = "respond"
"""The tool a model without structured output gives its final answer with."""
OUTPUT_CORRECTION_TYPE = "harness.output.correction"
"""``customType`` of the ``custom_message`` telling the model what is wrong with its answer."""
DEFAULT_OUTPUT_RETRIES = 2
"""Corrections a run may send before :class:`OutputValidationError`."""

_MAX_ERRORS = 10
_MAX_ERROR_CHARS = 300
_FENCE = re.compile(r"\A\s*```(?:json)?\s*\n(?P<body>.*)\n\s*```\s*\Z", re.DOTALL)


@frozen(kw_only=True)
class OutputSpec:
    """What the final answer must be.

    Attributes:
        schema: the JSON Schema (given, or made from the type).
        type: the type given, to convert the answer to; None for a schema dict.
        wire: the schema the model is given: ``schema`` itself when its root is an object,
            else an object ``{"value": ...}`` around it (APIs and tools take objects only).
        retries: corrections before :class:`OutputValidationError`.
    """

    schema: Mapping[str, JSONValue]
    type: Any
    wire: Mapping[str, JSONValue]
    retries: int

    @classmethod
    def of(
        cls, output_schema: Mapping[str, JSONValue] | type[Any] | Any, retries: int
    ) -> OutputSpec:
        """The spec for a JSON Schema dict or a type (:func:`schema_of`).

        Raises:
            ValueError: an invalid JSON Schema, or ``retries`` below 0.
            TypeError: a type that cannot be turned into a schema.
        """
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"output_retries must be 0 or more, not {retries!r}")
        if isinstance(output_schema, Mapping):
            schema: Mapping[str, JSONValue] = orjson.loads(orjson.dumps(output_schema))
            kind: Any = None
        else:
            schema, kind = schema_of(output_schema), output_schema
        check_schema(schema)
        wire: Mapping[str, JSONValue] = schema
        if schema.get("type") != "object":
            wire = {
                "type": "object",
                "properties": {"value": dict(schema)},
                "required": ["value"],
                "additionalProperties": False,
            }
        return cls(schema=schema, type=kind, wire=wire, retries=retries)

    @property
    def wrapped(self) -> bool:
        return self.wire is not self.schema

    def errors(self, value: Any) -> list[str]:
        """What is wrong with ``value`` against the wire schema (empty: nothing), one line
        each, the first :data:`_MAX_ERRORS`."""
        import jsonschema  # here: `import harness` stays fast (issue 24)

        validator = jsonschema.validators.validator_for(self.wire)(self.wire)
        found = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
        return [_line(e) for e in found[:_MAX_ERRORS]]

    def output(self, value: Any) -> Any:
        """The answer as returned on the reply: unwrapped, converted to the type if any."""
        if self.wrapped:
            value = value["value"]
        return value if self.type is None else convert(value, self.type)


def _line(error: jsonschema.ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(the whole answer)"
    text = f"{where}: {error.message}"
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."


def parse_answer(text: str) -> tuple[object, str | None]:
    """A reply's text as JSON (a ```json fence around it is allowed): the value, or why not."""
    fenced = _FENCE.match(text)
    body = fenced.group("body") if fenced else text
    try:
        return json.loads(body), None
    except ValueError as exc:
        return None, f"the reply is not JSON ({exc})"


@define
class OutputCheck:
    """One run's structured output: the spec, whether the model's API constrains replies
    (``native``), and what happened so far."""

    spec: OutputSpec
    mode: Literal["native", "tool"]
    attempts: int = 0
    settled: bool = False
    value: Any = None
    error: OutputValidationError | None = None
    _answer: list[object] = field(factory=list)

    @property
    def request_schema(self) -> Mapping[str, JSONValue] | None:
        """What goes with each request (native mode): the wire schema."""
        return self.spec.wire if self.mode == "native" else None

    def tools(self) -> dict[str, Tool]:
        """The ``respond`` tool (tool mode), else nothing."""
        if self.mode == "native":
            return {}
        return {RESPOND_TOOL_NAME: self._respond_tool()}

    def _respond_tool(self) -> Tool:
        async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
            self._answer.append(orjson.loads(orjson.dumps(input)))
            return ToolResult(content="Answer recorded.")

        return Tool(
            name=RESPOND_TOOL_NAME,
            description=(
                "Give your final answer with this tool, once you have it: its input is the "
                "answer, in the required shape. Calling it ends your turn."
            ),
            parameters=self.spec.wire,
            execute=execute,
        )

    def after_tools(self, reply: AssistantMessage, results: Sequence[ToolResultMessage]) -> bool:
        """Tool mode, after a turn's tool calls: True when the output is settled (a
        ``respond`` call was accepted, or the last allowed one failed): the run ends."""
        if self.mode == "native" or self.settled:
            return self.settled
        tried = [r for r in results if r.tool_name == RESPOND_TOOL_NAME]
        if not tried:
            return False
        if self._answer:
            self._accept(self._answer[0])
            return True
        self.attempts += 1
        if self.attempts > self.spec.retries:
            self._fail([tried[-1].text], reply)
            return True
        return False

    def on_stop(self, reply: AssistantMessage) -> list[Message]:
        """The model would end the run: accept its answer (native), or return the
        correction to send (nothing when settled; :attr:`error` set when out of retries)."""
        if self.settled:
            return []
        self.attempts += 1
        if self.mode == "native":
            value, problem = parse_answer(reply.text)
            errors = [problem] if problem is not None else self.spec.errors(value)
            if not errors:
                self._accept(value)
                return []
            text = (
                "Your last reply is not a JSON value matching the required output schema:\n"
                + "\n".join(f"- {e}" for e in errors)
                + "\nReply again with only the corrected JSON value, nothing else."
            )
        else:
            errors = [f"the run ended without a {RESPOND_TOOL_NAME} call"]
            text = (
                f"You ended without giving your final answer. Call the {RESPOND_TOOL_NAME} "
                "tool with it now, in the required shape."
            )
        if self.attempts > self.spec.retries:
            self._fail(errors, reply)
            return []
        return [CustomMessage(custom_type=OUTPUT_CORRECTION_TYPE, content=text, display=True)]

    def _accept(self, value: object) -> None:
        self.settled = True
        self.value = self.spec.output(value)

    def _fail(self, errors: list[str], reply: AssistantMessage) -> None:
        self.settled = True
        self.error = OutputValidationError(errors, self.attempts, reply)
