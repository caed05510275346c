"""Capacity: the performance model (`perf`, `perf_stack`, `perf_checks`) on the memory budget
of `serving.sizing`, its calibration (`calibration`) and the capacity planner's domain (`plan`,
`plan_perf`)."""
