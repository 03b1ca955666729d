"""KubeSim embedded in an existing asyncio loop (as ``batchd dev`` runs it)."""

from __future__ import annotations

import json

import aiohttp
import pytest

from kubesim import KubeSim


async def test_kubesim_serves_inside_a_running_loop():
    sim = KubeSim(kubelet=False)
    await sim.serve_async()
    try:
        assert sim.port != 0
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{sim.url}/version") as resp:
                assert (await resp.json())["gitVersion"] == "v1.32.0"
            body = json.dumps({"metadata": {"name": "embedded"}})
            async with session.post(f"{sim.url}/api/v1/namespaces", data=body,
                                    headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 201
        assert [n["metadata"]["name"] for n in sim.objects("", "namespaces")].count("embedded") == 1
    finally:
        await sim.shutdown_async()


def test_kubesim_refuses_non_loopback_addresses():
    with pytest.raises(ValueError):
        KubeSim(host="0.0.0.0")
