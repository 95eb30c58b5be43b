"""llm-chaos: chaos and resilience test harness for LLM inference services."""
from chaos.errors import (
    ChaosError,
    ConfigError,
    FaultError,
    FaultNotEffective,
    LoadError,
    SafetyError,
    SLOViolation,
    StackError,
    TargetError,
)

__version__ = "0.1.0"
__all__ = [
    "ChaosError", "ConfigError", "FaultError", "FaultNotEffective", "LoadError", "SafetyError",
    "SLOViolation", "StackError", "TargetError", "__version__",
]
