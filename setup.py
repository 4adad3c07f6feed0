# The C cores in native/ are compiled into numptx._native by cffi at install time.
from setuptools import setup

setup(cffi_modules=["native/build_ffi.py:ffibuilder"])
