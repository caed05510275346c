"""Capacity: the vLLM memory budget (`memory`), the performance model (`perf`, `perf_stack`,
`perf_checks`), its calibration (`calibration`) and the capacity planner's domain (`plan`,
`plan_perf`)."""
