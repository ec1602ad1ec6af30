from tests.support.shared_db import shared_db

__all__ = ["shared_db"]
