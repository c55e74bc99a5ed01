"""Drift detection, one feature (issue 34): read each account's calendar back, compare it with what calsync
believes it wrote, and per the tenant's policy record, report or repair what differs.

Inside, layered (pyproject's contracts): ``settings`` at the bottom; ``store`` (policies, sweep state, findings,
a target's verification) and ``compare`` (pure: targets against a read-back) above it; on top ``sweep`` (one
account's sweep job) and ``schedule`` (which accounts are due). The read-back contract adapters implement is in
core/model/drift.py; a provider that implements it is swept with nothing else to register.
"""
