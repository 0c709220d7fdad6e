"""Adapters around other libraries' private APIs: each in one module, checked by tests."""
