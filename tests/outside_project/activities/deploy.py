"""The deploy's one side effect, as an activity."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import activity


class DeployRequest(BaseModel):
    service: str
    version: str
    environment: str


@activity.defn(name="deploy_tools.record_deploy")
async def record_deploy(request: DeployRequest) -> str:
    """Stands in for the deploy; its id names the task that asked for it."""
    return f"{request.service}@{request.version} on {request.environment} by {activity.info().workflow_id}"
