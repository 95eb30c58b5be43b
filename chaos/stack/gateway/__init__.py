"""stack/gateway"""
