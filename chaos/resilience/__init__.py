"""resilience"""
