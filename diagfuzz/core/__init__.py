"""The core record: Case, Layout, Values, Verdict, the implementation protocol, and the word
and geometry helpers they need. Imports torch only: never Triton, a kernel or a spec."""
