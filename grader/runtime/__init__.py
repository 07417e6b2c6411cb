"""Code that runs next to the student's code: value conversion, the wire protocol, the
notebook executor and the worker. Must not import ``grader.hidden`` or anything trusted."""
