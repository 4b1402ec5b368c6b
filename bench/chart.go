package bench

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

	"github.com/dustin/go-humanize"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chart draws the median MB/s of the loader against its stream count (both axes logarithmic, so that
// ceilings far above the loader do not flatten it), one line per
// connection count and, with a throttle, the throttled loader and what it could reach; the ceilings
// and rivals are horizontal lines. It writes the same chart as SVG and PNG.
func (rep *Report) chart(svgPath, pngPath string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("loader bench: %s rows of %s, %.0f MB framed", humanize.Comma(rep.DatasetRows), rep.Format, float64(rep.DatasetBytes)/1e6)
	p.X.Label.Text = "streams"
	p.Y.Label.Text = "median MB/s (framed dataset / wall time), log scale"
	p.X.Scale = plot.LogScale{}
	// The legend goes right of the data, in room the x axis keeps free for it (every line ends at
	// the largest stream count).
	p.Legend.Top = true
	p.Legend.Left = false

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
	// On the log axis the lines take dataShare of the width; the legend gets the rest.
	p.X.Min = lo / 1.25
	p.X.Max = p.X.Min * math.Pow(hi*1.25/p.X.Min, 1/dataShare)
	var ticks plot.ConstantTicks
	for _, n := range streams {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	p.X.Tick.Marker = ticks
	p.Y.Scale = plot.LogScale{}

	used := 0
	next := func() color.Color {
		c := palette[used%len(palette)]
		used++
		return c
	}
	ymin, ymax := math.Inf(1), 0.0
	track := func(xys plotter.XYs) {
		for _, xy := range xys {
			if xy.Y > 0 && !math.IsInf(xy.Y, 0) {
				ymin, ymax = min(ymin, xy.Y), max(ymax, xy.Y)
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
	if ymax <= 0 {
		ymin, ymax = 1, 10 // nothing to draw: any range a log axis accepts
	}
	p.Y.Min, p.Y.Max = ymin/1.5, ymax*1.5
	p.Y.Tick.Marker = logTicks(p.Y.Min, p.Y.Max)
	for _, path := range []string{svgPath, pngPath} {
		if err := p.Save(11*vg.Inch, 6*vg.Inch, path); err != nil {
			return fmt.Errorf("chart %s: %w", path, err)
		}
	}
	return nil
}

// dataShare is the part of the x axis the lines take; the legend is drawn in the rest, on the right.
const dataShare = 0.7

// logTicks labels 1, 2 and 5 times the powers of ten between lo and hi, and marks the others.
func logTicks(lo, hi float64) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	// Bounded: from the decade below lo to the one above hi, and MB/s spans a few decades.
	for exp := math.Floor(math.Log10(lo)); exp <= math.Ceil(math.Log10(hi)) && len(ticks) < 200; exp++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, exp)
			if v < lo || v > hi {
				continue
			}
			label := ""
			if m == 1 || m == 2 || m == 5 {
				label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	return ticks
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
