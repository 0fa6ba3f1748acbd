"""Routing: complexity score, tiered router and calibration, health check, cost curve, progressive delivery.

Pure logic with no I/O except the rollout state file and the curve plot.
"""
