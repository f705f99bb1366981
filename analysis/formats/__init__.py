"""CP, Tucker and tensor-train formats side by side on one Q-tensor.

`analysis.formats.profile.format_profile` gives the approximation error
(Frobenius and sup) against parameters in each format;
``python -m analysis.formats`` (`analysis.formats.cli`) writes it as a table and a figure.
"""
