"""Shockwave (NSDI '23): plan the next rounds for jobs whose batch size changes."""
