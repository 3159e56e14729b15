"""Entry point: reconcile once Grafana answers, mark the pod ready, and check again now and then."""

import os
import time

from .reconcile import Grafana, load_state, missing_series, reconcile

READY_FILE = os.environ.get("TEAM_VIEWS_READY_FILE", "/run/team-views/ready")
RESYNC_SECONDS = float(os.environ.get("TEAM_VIEWS_RESYNC_SECONDS", "300"))


def main() -> None:
    state = load_state(os.environ["TEAM_VIEWS_STATE"], os.environ["TEAM_VIEWS_SECRETS"])
    grafana = Grafana(
        os.environ["TEAM_VIEWS_GRAFANA_URL"],
        state.admin_login,
        state.admin_password,
        cafile=os.environ.get("TEAM_VIEWS_CA"),
    )
    while True:
        grafana.wait_healthy()
        reconcile(grafana, state)
        with open(READY_FILE, "w") as ready:
            ready.write("reconciled\n")
        print(f"reconciled {len(state.teams)} team views", flush=True)
        for team in state.teams:
            for problem in missing_series(team, state.checks):
                print(f"warning: {problem}", flush=True)
        time.sleep(RESYNC_SECONDS)


if __name__ == "__main__":
    main()
