"""Tools for problem authors: ``new`` scaffolds a problem folder, ``validate`` proves it is sound."""
