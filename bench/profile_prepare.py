"""Profile ``prepare()`` on one long recording, driven as ``bench/long.py`` drives it.

    python bench/profile_prepare.py [--budget 128000] [--session cc_8463c716] [--top 40]

Prints per-call latencies (p50 / p95 / max, in ms), the slowest calls with whether they
compacted, and a cProfile of the prepare() calls only (appends are not profiled).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from long import SHARED, provider_of  # noqa: E402

from ctxwise import ContextManager, Policy  # noqa: E402
from ctxwise.formats import load  # noqa: E402
from ctxwise.replay import metrics  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=128_000)
    ap.add_argument("--session", default="cc_8463c716-a2ea-4c14-9efa-87158ebd9f20.json")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--sort", default="cumulative")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--from-call", type=int, default=0, help="profile only the calls from this index on")
    ap.add_argument("--callees", default="", help="also print what functions matching this call")
    ap.add_argument("--cpu", action="store_true", help="time by process CPU time (steadier on a loaded machine)")
    a = ap.parse_args()
    path = next((SHARED / "data" / "long").glob(f"*/{a.session}*"))
    conv = load(str(path))
    conv = conv[0] if isinstance(conv, list) else conv
    provider = provider_of(path)
    policy = Policy.preset("default", budget=a.budget, unit="tokens", provider=provider)
    prof = cProfile.Profile()
    clock = time.process_time if a.cpu else time.perf_counter
    lat: list[tuple[float, int, int]] = []
    with ContextManager("memory://", policy) as cm:
        s = cm.session("long", "run")
        for new, _, m in metrics.model_calls(conv.messages):
            if new:
                s.append(new)
            on = not a.no_profile and len(lat) >= a.from_call
            if on:
                prof.enable()
            t0 = clock()
            p = s.prepare()
            dt = (clock() - t0) * 1000
            if on:
                prof.disable()
            lat.append((dt, len(lat), len(p.events)))
            s.append([m])
    ms = [x[0] for x in lat]
    print(f"{path.name} budget {a.budget:,}: {len(ms)} calls, p50 {metrics.percentile(ms, 50):.2f} "
          f"p95 {metrics.percentile(ms, 95):.2f} max {max(ms):.2f} ms")
    print("slowest:", ", ".join(f"#{i} {d:.1f}ms ev{e}" for d, i, e in sorted(lat, reverse=True)[:16]))
    if not a.no_profile:
        st = pstats.Stats(prof).sort_stats(a.sort)
        st.print_stats(a.top)
        if a.callees:
            st.print_callees(a.callees)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
