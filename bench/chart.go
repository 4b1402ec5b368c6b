package bench

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chart draws the median MB/s of the loader against its stream count (log2 axis), one line per
// connection count and, with a throttle, the throttled loader and what it could reach; the ceilings
// and rivals are horizontal lines. It writes the same chart as SVG and PNG.
func (rep *Report) chart(svgPath, pngPath string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("loader bench: %s rows of %s, %.0f MB framed", groupDigits(rep.DatasetRows), rep.Format, float64(rep.DatasetBytes)/1e6)
	p.X.Label.Text = "streams"
	p.Y.Label.Text = "median MB/s (framed dataset / wall time)"
	p.X.Scale = plot.LogScale{}
	p.Legend.Top = true
	p.Legend.Left = true

	var streams []int
	for _, r := range rep.find(KindLoader, false) {
		streams = append(streams, r.Streams)
	}
	for _, r := range rep.find(KindLoader, true) {
		streams = append(streams, r.Streams)
	}
	slices.Sort(streams)
	streams = slices.Compact(streams)
	if len(streams) == 0 {
		streams = []int{1}
	}
	lo, hi := float64(streams[0]), float64(streams[len(streams)-1])
	p.X.Min, p.X.Max = lo/1.25, hi*1.25
	var ticks plot.ConstantTicks
	for _, n := range streams {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	p.X.Tick.Marker = ticks
	p.Y.Min = 0

	used := 0
	next := func() color.Color {
		c := palette[used%len(palette)]
		used++
		return c
	}
	ymax := 0.0
	track := func(xys plotter.XYs) {
		for _, xy := range xys {
			if !math.IsNaN(xy.Y) && !math.IsInf(xy.Y, 0) {
				ymax = max(ymax, xy.Y)
			}
		}
	}
	series := func(name string, rs []*Result, dashes []vg.Length) error {
		// One line per connection setting, in stream order.
		byConns := map[string]plotter.XYs{}
		var names []string
		for _, r := range rs {
			key := name
			if len(rep.connectionSettings(r.Throttled)) > 1 {
				switch r.Asked {
				case 0:
					key = name + ", default connections"
				case 1:
					key = name + ", 1 connection"
				default:
					key = fmt.Sprintf("%s, %d connections", name, r.Asked)
				}
			}
			if _, ok := byConns[key]; !ok {
				names = append(names, key)
			}
			byConns[key] = append(byConns[key], plotter.XY{X: float64(r.Streams), Y: r.stats(rep.DatasetBytes).mbs.median})
		}
		for _, key := range names {
			xys := byConns[key]
			slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
			track(xys)
			l, s, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			c := next()
			l.Color, l.Dashes, l.Width = c, dashes, vg.Points(2)
			s.Color, s.Shape = c, draw.CircleGlyph{}
			p.Add(l, s)
			p.Legend.Add(key, l, s)
		}
		return nil
	}
	hline := func(name string, v *float64) error {
		if v == nil {
			return nil
		}
		xys := plotter.XYs{{X: lo / 1.25, Y: *v}, {X: hi * 1.25, Y: *v}}
		track(xys)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color, l.Dashes, l.Width = next(), []vg.Length{vg.Points(6), vg.Points(3)}, vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s %.0f", name, *v), l)
		return nil
	}

	s := rep.Summary()
	if err := series("loader", rep.find(KindLoader, false), nil); err != nil {
		return err
	}
	for _, h := range []struct {
		name string
		v    *float64
	}{
		{"decode ceiling", s.DecodeCeilingMBs}, {"transport ceiling", s.TransportCeilingMBs},
		{"sink ceiling", s.SinkCeilingMBs}, {"ADBC", s.ADBCMBs}, {"hand-written", s.HandwrittenMBs},
	} {
		if err := hline(h.name, h.v); err != nil {
			return err
		}
	}
	if t := s.Throttled; t != nil {
		if err := series("loader throttled", rep.find(KindLoader, true), []vg.Length{vg.Points(2), vg.Points(2)}); err != nil {
			return err
		}
		var want plotter.XYs
		for _, r := range t.Results {
			if r.ExpectedMBs != nil {
				want = append(want, plotter.XY{X: float64(r.Streams), Y: *r.ExpectedMBs})
			}
		}
		if len(want) > 0 {
			track(want)
			l, err := plotter.NewLine(want)
			if err != nil {
				return err
			}
			l.Color, l.Dashes, l.Width = next(), []vg.Length{vg.Points(1), vg.Points(3)}, vg.Points(1.5)
			p.Add(l)
			p.Legend.Add("throttled expected: min(streams x rate, e2e)", l)
		}
		if err := hline("ADBC throttled", t.ADBCMBs); err != nil {
			return err
		}
		if err := hline("hand-written throttled", t.HandwrittenMBs); err != nil {
			return err
		}
	}
	if ymax > 0 {
		p.Y.Max = ymax * 1.45 // room for the legend above the lines
	}
	for _, path := range []string{svgPath, pngPath} {
		if err := p.Save(9*vg.Inch, 6*vg.Inch, path); err != nil {
			return fmt.Errorf("chart %s: %w", path, err)
		}
	}
	return nil
}

// connectionSettings lists the connection counts the (throttled) loader ran with.
func (rep *Report) connectionSettings(throttled bool) []int {
	var out []int
	for _, r := range rep.find(KindLoader, throttled) {
		if !slices.Contains(out, r.Asked) {
			out = append(out, r.Asked)
		}
	}
	return out
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}
