"""stack/sim"""
