"""Small ops for the graph tests (registered under ``graphtest.*`` when imported)."""

from __future__ import annotations

import numpy as np

from cuvil_perception.graph import Op, Param, ParamProblem, PortSpec, Sample, Sink, Source, register


@register
class Counter(Source):
    name = "graphtest.counter"
    params = (Param("frames", int, 3), Param("width", int, 4))

    def output_ports(self):
        return (PortSpec("values", "float32", (self.p["width"],)),
                PortSpec("ids", "int32", (None,)))


@register
class Scale(Op):
    name = "graphtest.scale"
    params = (Param("factor", float, 1.0), Param("width", int, 4),
              Param("mode", str, "mul", choices=("mul", "add")))

    def input_ports(self):
        return (PortSpec("values", "float32", (self.p["width"],)),)

    def output_ports(self):
        return (PortSpec("values", "float32", (self.p["width"],)),)

    def check(self):
        if self.p["factor"] == 0:
            raise ParamProblem("factor", "factor 0 would erase the signal")

    def process(self, inputs, frame):
        return {"values": inputs["values"] * np.float32(self.p["factor"])}


@register
class Collect(Sink):
    name = "graphtest.collect"


@register
class Needs(Op):
    name = "graphtest.needs"
    params = (Param("required_thing", str),)

    def input_ports(self):
        return (PortSpec("values", "float32", (4,)),)
