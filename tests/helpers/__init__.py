"""Helpers shared by the tests: fakes, planted data files, test spaces and studies, servers, user workloads."""
