"""In-cluster addresses for process pods: each Service's ClusterIP and port, forwarded to an endpoint.

There is no kube-proxy in the lab. The lab's kubelet writes every Service with its ready
endpoints to one file; this forwarder runs in a network namespace of its own on the lab's
bridge (as root, to hold every ClusterIP on its loopback), every pod routes the Service
range to it, and it pipes each connection to an endpoint, as kube-proxy's rules would send
it, so no pod's own ports are taken. TCP only; the endpoint sees the forwarder's address
as the client's (as kube-proxy's masquerading does). With `--on-host` it serves the node
ports instead, in the host's namespace, at the gateway address that stands for the nodes'.
Standard library.
"""

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path

Target = tuple[str, int]


class Forwarder:
    def __init__(self, services: Path, *, own_addresses: bool = True) -> None:
        self.services = services
        self.own_addresses = own_addresses
        """Add each front address to the loopback (ClusterIPs); the host's own addresses are there already."""
        self.targets: dict[Target, list[Target]] = {}
        self.servers: dict[Target, asyncio.AbstractServer] = {}
        self.addresses: set[str] = set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def _handler(self, front: Target):  # type: ignore[no-untyped-def]
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            endpoints = self.targets.get(front) or []
            if not endpoints:
                writer.close()
                return
            host, port = random.choice(endpoints)
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))

        return handle

    async def refresh(self) -> None:
        try:
            entries = json.loads(self.services.read_text() or "[]")
        except (OSError, json.JSONDecodeError):
            return
        wanted: dict[Target, list[Target]] = {}
        for entry in entries:
            wanted[(entry["ip"], int(entry["port"]))] = [(t[0], int(t[1])) for t in entry["endpoints"]]
        self.targets = wanted
        for front in wanted:
            if front in self.servers:
                continue
            if self.own_addresses and front[0] not in self.addresses:
                subprocess.run(["ip", "addr", "add", f"{front[0]}/32", "dev", "lo"], capture_output=True, check=False)
                self.addresses.add(front[0])
            try:
                self.servers[front] = await asyncio.start_server(self._handler(front), front[0], front[1])
            except OSError as error:
                print(f"forwarder: cannot listen on {front[0]}:{front[1]}: {error}", file=sys.stderr, flush=True)
        for front in [f for f in self.servers if f not in wanted]:
            self.servers.pop(front).close()

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(1)


if __name__ == "__main__":
    asyncio.run(Forwarder(Path(sys.argv[1]), own_addresses="--on-host" not in sys.argv[2:]).run())
