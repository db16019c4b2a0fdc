"""Session 11: quant_sw at M = 1 only, the fp8 GEMV tile variants (run with --procs 0)."""
import sys
from wmtp.measure.scripts import quant_sw
quant_sw.MS = (1,)
quant_sw.run_dense.__defaults__ = ((1,),)
sys.exit(quant_sw.main(sys.argv[1:]))
