"""``@tool`` with Pydantic models, and without Pydantic imported at all."""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from prism_core import ToolArgumentsError, ToolExecutionContext, tool


def ctx() -> ToolExecutionContext:
    """A tool context outside any run."""
    return ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c1", tool_name="t")


class Address(BaseModel):
    """Where a customer lives."""

    street: str
    city: str = "Oslo"


class Customer(BaseModel):
    name: str = Field(description="Full name.")
    age: int = Field(ge=0)
    address: Address | None = None


class Node(BaseModel):
    label: str
    children: list[Node] = []


class Invoice(BaseModel):
    number: int
    issued: datetime.date


@dataclasses.dataclass
class Order:
    customer: Customer
    quantity: int = 1


def test_models_are_described_by_pydantic_in_defs() -> None:
    """A model's schema is Pydantic's own, in $defs, with nested models merged beside it."""

    @tool
    def register(customer: Customer, tree: Node, order: Order | None = None) -> None:
        """Register a customer."""

    schema = dict(register.parameters or {})
    Draft202012Validator.check_schema(schema)
    defs = schema["$defs"]
    assert schema["properties"]["customer"] == {"$ref": "#/$defs/Customer"}
    assert defs["Customer"] == _without_defs(Customer.model_json_schema())
    assert defs["Customer"]["properties"]["name"]["description"] == "Full name."
    assert defs["Customer"]["properties"]["age"]["minimum"] == 0
    assert defs["Address"]["description"] == "Where a customer lives."
    assert schema["properties"]["tree"] == {"$ref": "#/$defs/Node"}
    assert defs["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert defs["Order"]["properties"]["customer"] == {"$ref": "#/$defs/Customer"}
    validator = Draft202012Validator(schema)
    assert validator.is_valid(
        {
            "customer": {"name": "Ada", "age": 36, "address": {"street": "Main"}},
            "tree": {"label": "r"},
        }
    )
    assert not validator.is_valid({"customer": {"name": "Ada", "age": -1}, "tree": {"label": "r"}})


class Other:
    @dataclasses.dataclass
    class Address:
        line: str


def test_a_name_taken_by_another_type_moves_pydantic_defs_under_a_prefix() -> None:
    """A dataclass called Address and a model nesting Pydantic's Address both keep their defs."""

    @tool
    def ship(to: Other.Address, customer: Customer) -> None:
        """Ship."""

    schema = dict(ship.parameters or {})
    Draft202012Validator.check_schema(schema)
    defs = schema["$defs"]
    assert defs["Address"]["properties"] == {"line": {"type": "string"}}
    assert schema["properties"]["customer"] == {"$ref": "#/$defs/Customer"}
    assert defs["Customer"]["properties"]["address"]["anyOf"][0] == {
        "$ref": "#/$defs/Customer2_Address"
    }
    assert defs["Customer2_Address"]["required"] == ["street"]
    validator = Draft202012Validator(schema)
    good = {
        "to": {"line": "1 Main"},
        "customer": {"name": "A", "age": 1, "address": {"street": "x"}},
    }
    assert validator.is_valid(good)
    assert not validator.is_valid(good | {"customer": {"name": "A", "age": 1, "address": {}}})


def _without_defs(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$defs"}


def test_models_are_built_from_arguments_and_returned_as_json() -> None:
    """Arguments become model instances (also inside dataclasses); models return as JSON."""
    seen: list[Any] = []

    @tool
    def place(order: Order, customer: Customer) -> Invoice:
        """Place an order."""
        seen.extend([order, customer])
        return Invoice(number=order.quantity, issued=datetime.date(2026, 1, 2))

    result = place.execute(
        {
            "order": {"customer": {"name": "Ada", "age": 36}, "quantity": 3},
            "customer": {"name": "Bo", "age": 5, "address": {"street": "Elm"}},
        },
        ctx(),
    )
    assert result == {"number": 3, "issued": "2026-01-02"}
    order, customer = seen
    assert isinstance(order.customer, Customer)
    assert order.customer.name == "Ada"
    assert customer.address == Address(street="Elm", city="Oslo")

    @tool
    def listing() -> dict[str, Any]:
        """Models nested in plain data."""
        return {"people": [Customer(name="Ada", age=36)], "count": 1}

    assert listing.execute({}, ctx()) == {
        "people": [{"name": "Ada", "age": 36, "address": None}],
        "count": 1,
    }


def test_model_validation_errors_become_tool_argument_errors() -> None:
    """Pydantic's own checks (here ``ge=0``) report the field path."""

    @tool
    def place(customer: Customer, order: Order | None = None) -> None:
        """Place an order."""

    with pytest.raises(ToolArgumentsError) as caught:
        place.execute({"customer": {"name": "Ada", "age": -1}}, ctx())
    message = str(caught.value)
    assert "age: Input should be greater than or equal to 0 @ $.customer" in message
    with pytest.raises(
        ToolArgumentsError, match=r"address\.street: Field required @ \$\.order\.customer"
    ):
        place.execute(
            {
                "customer": {"name": "Ada", "age": 1},
                "order": {"customer": {"name": "Bo", "age": 2, "address": {}}},
            },
            ctx(),
        )


def test_tools_work_without_pydantic() -> None:
    """Without Pydantic importable, ``@tool`` works and never tries to import it."""
    script = textwrap.dedent(
        """
        import dataclasses, sys
        sys.modules["pydantic"] = None  # any import of pydantic now fails
        from prism_core import ToolExecutionContext, tool

        @dataclasses.dataclass
        class Point:
            x: int

        @tool
        def move(point: Point, by: int = 1) -> Point:
            "Move a point."
            return Point(point.x + by)

        context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c", tool_name="m")
        assert move.execute({"point": {"x": 1}}, context) == {"x": 2}
        assert move.parameters["$defs"]["Point"]["required"] == ["x"]
        assert sys.modules["pydantic"] is None
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
