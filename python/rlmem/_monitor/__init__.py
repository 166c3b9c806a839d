"""The parts of :class:`rlmem.StepMonitor`, one job a module; rlmem.monitor assembles them.

* ``sampling`` -- reading torch's (or rlmem's runtime's) memory figures into a sample
* ``alerts`` -- what an alert is, and when one of a kind is raised again
* ``rules`` -- the alerts of this rank's samples (librlmem's rules applied)
* ``messages`` -- the words of each alert
* ``leak_recording`` -- recording a few steps to name a leak's allocation site and holder
* ``gather`` -- the figures of every rank, gathered to rank 0, and their alerts
* ``log`` -- the JSON-lines log and where alerts go (logging, warnings, on_alert)
"""
