"""Median confidence intervals under zCDP (paper 004)."""
