"""faults"""
