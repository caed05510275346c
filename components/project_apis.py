"""Enable the Google APIs a stack needs, so an empty project works without hand steps."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
from pulumi_gcp import projects


class ProjectApis(pulumi.ComponentResource):
    """One `projects.Service` per API; other components depend on this one."""

    services: list[projects.Service]

    def __init__(
        self, name: str, apis: Sequence[str], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gemma4:index:ProjectApis", name, None, opts)
        self.services = [
            projects.Service(
                f"{name}-{api.split('.')[0]}",
                service=api,
                # Other workloads in the project may use the same API: never disable it on destroy.
                disable_on_destroy=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for api in apis
        ]
        self.register_outputs({"apis": list(apis)})
