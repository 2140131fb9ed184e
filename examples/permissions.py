"""Allow `git status` under bash and deny every other bash command: a SecuritySupervisor with
one allow rule, in dont_ask mode (nothing that needs asking runs), auditing every decision.

Run: .venv/bin/python examples/permissions.py
(offline: the scripted faux model asks for three commands)
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from pathlib import Path

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    PermissionDecisionEvent,
    PermissionRules,
    SecuritySupervisor,
    ToolResultMessage,
    bash_tool,
)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="harness-example-") as folder:  # removed at the end
        project = Path(folder)
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        asyncio.run(check_repository(project))


async def check_repository(project: Path) -> None:
    session = await JsonlSessionRepo(project / ".sessions").create(str(project))
    model = FauxModel(
        [
            FauxReply(
                tool_calls=[
                    FauxToolCall(name="bash", arguments={"command": "git status --short"}),
                    FauxToolCall(name="bash", arguments={"command": "git push --force"}),
                    FauxToolCall(name="bash", arguments={"command": "git status; rm -rf ."}),
                ]
            ),
            "Only git status was allowed.",
        ]
    )
    supervisor = SecuritySupervisor(
        mode="dont_ask",  # whatever no rule allows is denied, nobody is asked
        rules=PermissionRules(allow=["bash(git status:*)"]),
        setting_sources=(),  # rules from this script only, not from settings files
    )
    harness = AgentHarness(
        session=session, model=model, tools=[bash_tool()], supervisor=supervisor, cwd=project
    )

    @harness.on(PermissionDecisionEvent)
    def audit(sender: object, event: PermissionDecisionEvent) -> None:
        print(f"{event.decision}: {event.operation_key}")

    await harness.prompt("Check the repository")
    for message in session.build_context().messages:
        if isinstance(message, ToolResultMessage):
            print(f"  is_error={message.is_error}")


if __name__ == "__main__":
    main()
