"""How patterns are matched: the compiler (Pattern -> NFA), the NFA model and the engines.

Internal: users import from :mod:`cep`.
"""
