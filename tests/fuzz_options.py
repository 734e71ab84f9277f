"""Compile-time option values as a module's attributes, for fuzz kernels that spell ``sem=fuzz_options.V_relaxed``
(tests/fuzz_source.py, feature ``keyword_spellings``).  Every value a fuzz kernel's castpile or Triton call takes."""

import triton.language as tl

V_relaxed = tl.constexpr("relaxed")
V_acq_rel = tl.constexpr("acq_rel")
V_release = tl.constexpr("release")
V_acquire = tl.constexpr("acquire")
V_gpu = tl.constexpr("gpu")
V_sys = tl.constexpr("sys")
V_set = tl.constexpr("set")
V_add = tl.constexpr("add")
V_eq = tl.constexpr("eq")
V_ne = tl.constexpr("ne")
V_ge = tl.constexpr("ge")
V_gt = tl.constexpr("gt")
V_le = tl.constexpr("le")
V_lt = tl.constexpr("lt")
V_evict_last = tl.constexpr("evict_last")
V_cg = tl.constexpr(".cg")
V_True = tl.constexpr(True)
