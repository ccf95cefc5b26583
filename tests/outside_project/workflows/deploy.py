"""Deploy a service once a person has picked where: one form question with an enum."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.deploy import DeployRequest, record_deploy

    from longtools import ToolError, ask_form, report


class Environment(StrEnum):
    staging = "staging"
    production = "production"


class DeployInput(BaseModel):
    service: str = Field(min_length=1, description="The service to deploy.")
    version: str = Field(min_length=1, description="The version to deploy, e.g. 1.4.2.")


class Target(BaseModel):  # a form: flat fields only
    environment: Environment = Field(description="Where to deploy it.")


class Deployed(BaseModel):
    service: str
    version: str
    environment: Environment
    deployment: str


@workflow.defn(name="deploy_tools.deploy_service")
class DeployService:
    """Deploy a service, once a person has picked the environment."""

    @workflow.run
    async def run(self, args: DeployInput) -> Deployed:
        answer = await ask_form(f"Deploy {args.service} {args.version} where?", Target)
        if answer.content is None:
            raise ToolError(f"{args.service} was not deployed.")
        environment = answer.content.environment
        report(f"Deploying to {environment.value}")
        deployment = await workflow.execute_activity(
            record_deploy,
            DeployRequest(service=args.service, version=args.version, environment=environment.value),
            start_to_close_timeout=timedelta(seconds=30),
        )
        return Deployed(
            service=args.service, version=args.version, environment=environment, deployment=deployment
        )
