"""A tool author's project, as it lives outside the longtools repository (tests/test_package.py
copies this folder to a temporary directory and serves it with ``longtools serve --tools
deploy_tools``). Its ``workflows/`` and ``activities/`` packages have the names most Temporal
projects use: they must not collide with anything longtools installs.

``deploy_service`` (a long tool) asks which environment, then deploys there; ``service_status``
(a quick tool) answers at once; ``label_service`` (a quick tool) accepts arguments its input model
does not name, because the model says so (``extra="allow"``).
"""

from __future__ import annotations

from typing import Any

from activities.deploy import record_deploy
from pydantic import BaseModel, ConfigDict, Field
from workflows.deploy import Deployed, DeployInput, DeployService

from longtools import Registry, Round, Settings, ToolReturn


class StatusInput(BaseModel):
    service: str = Field(min_length=1, description="The service to look at.")


class ServiceStatus(BaseModel):
    service: str
    healthy: bool


class LabelInput(BaseModel):
    """Every argument besides ``service`` is a label to set."""

    model_config = ConfigDict(extra="allow")

    service: str = Field(min_length=1)


class Labels(BaseModel):
    service: str
    labels: dict[str, Any]


def register(registry: Registry, settings: Settings) -> None:
    @registry.tool("service_status", input=StatusInput, output=ServiceStatus)
    async def service_status(args: StatusInput, rnd: Round) -> ToolReturn:
        """Whether a service is healthy."""
        return ServiceStatus(service=args.service, healthy=True)

    @registry.tool("label_service", input=LabelInput, output=Labels)
    async def label_service(args: LabelInput, rnd: Round) -> ToolReturn:
        """Set labels on a service: every other argument is one."""
        return Labels(service=args.service, labels=dict(args.model_extra or {}))

    registry.long_tool("deploy_service", workflow=DeployService, input=DeployInput, output=Deployed)
    registry.add_activities(record_deploy)
